/**
 * The two real databases every SQL test runs on: a sqlite file in a temp
 * folder, and a throwaway Postgres cluster (testkit's Postgres), one per
 * test file, with a fresh database per test. Postgres that cannot start
 * fails the suite: it is never skipped.
 */
import { layer, type Vitest } from "@effect/vitest"
import { Context, Effect, Layer, Redacted, Scope } from "effect"
import { Postgres } from "@skein/testkit"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** Live clock: the logs poll and the mirror stamps times. */
type Methods<R> = Vitest.MethodsNonLive<R, true>

export class Backing extends Context.Tag("test/Backing")<Backing, {
  readonly name: "sqlite" | "postgres"
  /** A store URL no other test uses. */
  readonly fresh: Effect.Effect<string, Postgres.PostgresUnavailable, Scope.Scope>
  /** The database server, for tests that take it down (Postgres only). */
  readonly server: Postgres.Postgres | undefined
}>() {}

export const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

export const sqlite: Layer.Layer<Backing> = Layer.succeed(Backing, {
  name: "sqlite",
  fresh: Effect.map(tempDir("skein-sql-"), (dir) => `sqlite:${Path.join(dir, "store.db")}`),
  server: undefined
})

let databases = 0

export const postgres: Layer.Layer<Backing, Postgres.PostgresUnavailable> = Layer.scoped(
  Backing,
  Effect.map(Postgres.start(), (server) => ({
    name: "postgres" as const,
    fresh: Effect.suspend(() => Effect.map(server.database(`t${++databases}`), Redacted.value)),
    server
  }))
)

/** Runs `body` once per backing, each in its own describe. */
export const onBoth = (body: (it: Methods<Backing>, name: string) => void) => {
  layer(sqlite, { excludeTestServices: true })("sqlite", (it) => body(it, "sqlite"))
  layer(postgres, { timeout: 120_000, excludeTestServices: true })("postgres", (it) => body(it, "postgres"))
}
