/**
 * Each runner has its own name in the ask ledger: a runner that starts
 * closes only the asks its own earlier incarnation left open (its CLIs died
 * with it), never those of another live runner on the same machine.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { PermissionBroker, ServerEvents } from "@skein/serve"
import { AskLedger, SessionCatalog, SqlStore } from "@skein/sql"
import { ClaudeCli } from "@skein/testkit"
import { Effect, Layer } from "effect"
import * as Path from "node:path"
import * as ClusterServe from "../src/ClusterServe.js"
import * as RunnerSessions from "../src/RunnerSessions.js"

const socketRunner = (port: number): ClusterServe.Runner => ({
  _tag: "Socket",
  options: { runnerAddress: { host: "127.0.0.1", port } }
})

describe("the ask ledger's host per runner", () => {
  it("a socket runner is named by its address; a single runner keeps the machine's name", () => {
    expect(ClusterServe.askHostOf(socketRunner(7001))).toBe("runner-127.0.0.1:7001")
    expect(ClusterServe.askHostOf(socketRunner(7002))).not.toBe(ClusterServe.askHostOf(socketRunner(7001)))
    expect(ClusterServe.askHostOf({ _tag: "Single" })).toBeUndefined()
  })

  it.scopedLive("a runner starting on one machine closes its own earlier asks, not another runner's", () =>
    Effect.gen(function*() {
      const dirs = yield* ClaudeCli.offlineDirs("skein-askhost-")
      const database = Layer.mergeAll(SqlStore.layer(`sqlite:${Path.join(dirs.root, "cluster.db")}`), NodeContext.layer)
      const context = yield* Layer.build(Layer.mergeAll(
        SessionCatalog.layer,
        PermissionBroker.layer(),
        ServerEvents.layer({ dir: Path.join(dirs.root, "events") }),
        ProcessHost.layerMemory()
      ).pipe(Layer.provideMerge(database)))
      const hostA = ClusterServe.askHostOf(socketRunner(7001))
      const hostB = ClusterServe.askHostOf(socketRunner(7002))
      const ledger = (hostName: string | undefined) => Effect.provide(AskLedger.make({ hostName }), context)
      const ask = (id: string) => ({
        id,
        kind: "permission" as const,
        cliSessionId: `cli-${id}`,
        requestId: `req-${id}`,
        directory: dirs.cwd,
        request: { id }
      })
      // Runner A is alive with an ask open; runner B's earlier run died with one open.
      const a = yield* ledger(hostA)
      yield* a.open(ask("per_a"))
      yield* Effect.flatMap(ledger(hostB), (b) => b.open(ask("per_b")))

      // Runner B starts again at its address: its registry closes what its earlier run left, and only that.
      yield* Effect.provide(RunnerSessions.make({ configDir: dirs.configDir, askHost: hostB }), context)
      expect(yield* a.isOpen("per_b")).toBe(false)
      expect(yield* a.isOpen("per_a")).toBe(true)
      expect((yield* a.pending()).map((o) => o.id)).toEqual(["per_a"])
    }))
})
