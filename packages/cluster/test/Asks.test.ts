/**
 * Asks across runners, on the single runner over sqlite with the real CLI
 * and FakeModel: a permission ask is listed from the ledger, answered from
 * an edge whose own broker does not hold it (another runner's, as far as
 * the ask goes) through the session's entity, and reaches the CLI; a second
 * answer and an unknown id are not found. The session is busy in the
 * cluster's status while its turn runs. An ask a dead runner left open is
 * closed (`host restarted`) when the session's entity starts here.
 */
import * as Sharding from "@effect/cluster/Sharding"
import { describe, expect, it } from "@effect/vitest"
import { PermissionBroker } from "@skein/serve"
import { AskLedger, SqlStore } from "@skein/sql"
import { FakeModel } from "@skein/testkit"
import { Context, Effect, Exit } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ClusterAsks from "../src/ClusterAsks.js"
import * as RunnerSessions from "../src/RunnerSessions.js"
import * as Harness from "./harness.js"

const idOf = (payload: { readonly properties: unknown }) =>
  typeof payload.properties === "object" && payload.properties !== null && "id" in payload.properties ? String(payload.properties.id) : ""

describe("asks on the cluster (single runner, sqlite)", () => {
  it.scopedLive("a permission answered from an edge that does not hold it reaches the CLI through the entity; again is not found", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("Bash", { command: "touch made-through-the-entity.txt" }), FakeModel.text("Done.")]
      })
      const server = yield* Harness.start(model)
      const session = yield* server.registry.create({ directory: server.dirs.cwd })
      const from = yield* server.events.nextSeq
      yield* server.registry.promptAsync(session.id, "Make the file")
      const asked = yield* Harness.eventsOf(server, session.id, from, (all) => all.some((p) => p.type === "permission.asked")).pipe(
        Effect.timeout("60 seconds")
      )
      const requestID = idOf(asked.find((p) => p.type === "permission.asked")!)
      expect(requestID).toMatch(/^per_/)
      // Busy wherever it runs: its turn is open in the ledger.
      expect((yield* server.registry.status)[session.id]).toEqual({ type: "busy" })
      // Listed from the ask ledger, as every runner's edge lists it.
      const listed = yield* Effect.promise(async () =>
        (await fetch(`${server.url}/permission?directory=${encodeURIComponent(server.dirs.cwd)}`, { headers: server.headers })).json()
      )
      expect((listed as ReadonlyArray<{ id: string }>).map((p) => p.id)).toEqual([requestID])

      // Another runner's edge: its own broker holds nothing of this session.
      const elsewhere = yield* ClusterAsks.make.pipe(
        Effect.provideServiceEffect(PermissionBroker.PermissionBroker, PermissionBroker.make()),
        Effect.provideService(Sharding.Sharding, Context.get(server.context, Sharding.Sharding)),
        Effect.provideService(AskLedger.AskLedger, Context.get(server.context, AskLedger.AskLedger)),
        Effect.provideService(RunnerSessions.RunnerSessions, Context.get(server.context, RunnerSessions.RunnerSessions))
      )
      yield* elsewhere.reply(requestID, { reply: "once" })
      const rest = yield* Harness.eventsOf(server, session.id, from, (all) => all.some((p) => p.type === "session.idle")).pipe(
        Effect.timeout("60 seconds")
      )
      expect(rest.map((p) => p.type)).toContain("permission.replied")
      expect(Fs.existsSync(Path.join(server.dirs.cwd, "made-through-the-entity.txt"))).toBe(true)

      const again = yield* Effect.exit(elsewhere.reply(requestID, { reply: "once" }))
      expect(Exit.isFailure(again) && JSON.stringify(again.cause)).toContain("PermissionNotFound")
      const unknown = yield* Effect.promise(() =>
        fetch(`${server.url}/permission/per_unknown/reply`, {
          method: "POST",
          headers: { ...server.headers, "content-type": "application/json" },
          body: JSON.stringify({ reply: "once" })
        })
      )
      expect(unknown.status).toBe(404)
      expect(yield* server.registry.status).toEqual({})
    }))

  it.scopedLive("an ask a dead runner left open is closed with host restarted when the session's entity starts here", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Fresh answer.")] })
      const server = yield* Harness.start(model)
      const session = yield* server.registry.create({ directory: server.dirs.cwd })
      // What a runner on another machine wrote before it died mid-ask.
      const dead = yield* AskLedger.make({ hostName: "dead-runner" }).pipe(Effect.provideService(SqlStore.SqlStore, server.store))
      yield* dead.open({
        id: "per_leftopen",
        kind: "permission",
        cliSessionId: session.cliSessionId,
        requestId: "req-1",
        directory: session.directory,
        request: { id: "per_leftopen", sessionID: session.id, permission: "bash", patterns: [], metadata: {}, always: [] }
      })
      const from = yield* server.events.nextSeq
      const reply = yield* server.registry.prompt(session.id, "hello")
      expect(reply.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toContain("Fresh answer.")
      expect(yield* dead.isOpen("per_leftopen")).toBe(false)
      const seen = yield* Harness.eventsOf(server, session.id, from, (all) => all.some((p) => p.type === "permission.replied"))
      expect(seen.find((p) => p.type === "permission.replied")?.properties).toMatchObject({
        requestID: "per_leftopen",
        reply: "reject",
        reason: AskLedger.hostRestarted
      })
    }))
})
