/**
 * `running` cluster-wide: two runners' registries over one store (sqlite, and Postgres),
 * the real CLI and FakeModel. A CLI live on runner A is listed by runner B
 * (from A's published row); once A stops, B no longer lists it; a row no
 * runner refreshes (a dead runner's) is not listed, and the next runner to
 * start deletes it.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { PermissionBroker, ServerEvents } from "@skein/serve"
import { SessionCatalog, SqlStore } from "@skein/sql"
import { ClaudeCli, FakeModel, Postgres } from "@skein/testkit"
import { Context, Effect, Exit, Layer, Redacted, Schedule, Scope } from "effect"
import * as Path from "node:path"
import * as RunningSessions from "../src/internal/runningSessions.js"
import * as RunnerSessions from "../src/RunnerSessions.js"

/** The database both runners share: a sqlite file under `root`, or a throwaway Postgres. */
const databaseFor = (backing: "sqlite" | "postgres", root: string) =>
  backing === "sqlite"
    ? Effect.succeed(`sqlite:${Path.join(root, "cluster.db")}`)
    : Effect.flatMap(Effect.orDie(Postgres.start()), (pg) => Effect.map(Effect.orDie(pg.database("running")), Redacted.value))

describe.each(["sqlite", "postgres"] as const)("running sessions across runners (%s)", (backing) => {
  it.scopedLive("a CLI live on one runner is listed by another until that runner stops; a stale row is not listed, and the next runner to start clears it", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Live on A.")] })
      const dirs = yield* ClaudeCli.offlineDirs("skein-running-")
      const context = yield* Layer.build(Layer.mergeAll(
        SessionCatalog.layer,
        PermissionBroker.layer(),
        ServerEvents.layer({ dir: Path.join(dirs.root, "events") }),
        ProcessHost.layerMemory()
      ).pipe(Layer.provideMerge(Layer.mergeAll(SqlStore.layer(yield* databaseFor(backing, dirs.root)), NodeContext.layer))))
      const runner = (scope: Scope.Scope) =>
        Layer.buildWithScope(
          RunningSessions.layer({ interval: "200 millis", expiry: "2 seconds" }).pipe(
            Layer.provideMerge(RunnerSessions.layer({
              configDir: dirs.configDir,
              roots: [dirs.cwd],
              session: {
                env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: dirs.configDir, tmpDir: dirs.tmpDir }),
                bare: true,
                stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
              }
            })),
            Layer.provide(Layer.succeedContext(context))
          ),
          scope
        )
      const scopeA = yield* Scope.make()
      const a = yield* runner(scopeA)
      const b = yield* runner(yield* Effect.scope)
      const { registry: onA } = Context.get(a, RunnerSessions.RunnerSessions)
      const listedBy = (runner: typeof a) => Context.get(runner, RunningSessions.RunningSessions).all

      const session = yield* onA.create({ directory: dirs.cwd })
      yield* onA.prompt(session.id, "hello")
      expect(yield* onA.running).toEqual([session.id])
      expect(yield* listedBy(a)).toEqual([session.id])
      // B learns it from A's row within a beat or two.
      const seenByB = yield* listedBy(b).pipe(
        Effect.filterOrFail((ids) => ids.includes(session.id)),
        Effect.retry(Schedule.spaced("100 millis")),
        Effect.timeout("20 seconds")
      )
      expect(seenByB).toEqual([session.id])

      // A stops (its CLI with it) and withdraws its row: B lists nothing.
      yield* Scope.close(scopeA, Exit.void)
      expect(yield* listedBy(b)).toEqual([])

      // A runner that died without withdrawing: its row, no longer refreshed, is not listed.
      const { sql } = Context.get(context, SqlStore.SqlStore)
      yield* sql`INSERT INTO skein_cluster_running (runner, sessions, beat) VALUES ('dead', '["ses_dead"]', 0)`
      expect(yield* listedBy(b)).toEqual([])
      // The next runner to start clears it.
      yield* runner(yield* Effect.scope)
      expect(yield* sql`SELECT runner FROM skein_cluster_running WHERE runner = 'dead'`).toEqual([])
    }))
})
