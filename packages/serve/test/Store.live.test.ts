/**
 * skein serve with a session store (`--store`), on both databases, with the
 * real CLI and FakeModel: what a server on another config dir (another
 * machine with the same checkout) finds of a session, the asks an earlier
 * run left open, and a database lost mid-session.
 */
import { describe, expect, it } from "@effect/vitest"
import { createOpencodeClient } from "@opencode-ai/sdk/v2"
import { AskLedger, SqlStore, StoreUrl, TranscriptMirror } from "@skein/sql"
import { ClaudeCli, FakeModel, Postgres } from "@skein/testkit"
import { Effect, Exit, Redacted, Schedule, Scope, Stream } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Harness from "./harness.js"

const text = (parts: ReadonlyArray<{ readonly type: string }>) =>
  parts.flatMap((p) => (p.type === "text" && "text" in p && typeof p.text === "string" ? [p.text] : []))

/** The transcript the CLI wrote under `configDir` for `cliSessionId`. */
const transcriptIn = (configDir: string, cliSessionId: string) => {
  const projects = Path.join(configDir, "projects")
  for (const project of Fs.existsSync(projects) ? Fs.readdirSync(projects) : []) {
    const file = Path.join(projects, project, `${cliSessionId}.jsonl`)
    if (Fs.existsSync(file)) return file
  }
  return undefined
}

const emptyDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

/** What the store holds of a session's main chain: restored into an empty config dir. */
const mirrored = (url: string, cliSessionId: string): Effect.Effect<Buffer, unknown> =>
  Effect.gen(function*() {
    const store = yield* SqlStore.make(yield* StoreUrl.parse(url))
    const mirror = yield* TranscriptMirror.make.pipe(Effect.provideService(SqlStore.SqlStore, store))
    const dir = yield* emptyDir("skein-restored-")
    yield* mirror.restore(cliSessionId, dir)
    const file = transcriptIn(dir, cliSessionId)
    return file === undefined ? Buffer.alloc(0) : Fs.readFileSync(file)
  }).pipe(Effect.scoped)

const post = (server: Harness.Running, path: string, body: unknown) =>
  Effect.promise(() =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { ...server.headers, "content-type": "application/json" },
      body: JSON.stringify(body)
    }).then(async (r) => ({ status: r.status, body: await r.text() }))
  )

/** The logged events until `done` holds for one of them. */
const eventsUntil = (server: Harness.Running, done: (type: string, properties: Record<string, unknown>) => boolean) =>
  server.events.follow(1).pipe(
    Stream.map((r) => r.message.payload as { readonly type: string; readonly properties: Record<string, unknown> }),
    Stream.takeUntil((e) => done(e.type, e.properties)),
    Stream.runCollect,
    Effect.map((c) => Array.from(c)),
    Effect.timeout("60 seconds")
  )

const suite = (backing: "sqlite" | "postgres") =>
  describe(`skein serve --store (${backing})`, () => {
    it.scopedLive("a turn's end is reported once its transcript is mirrored; a server on a new config dir lists the session, shows its messages and resumes it from the store", () =>
      Effect.gen(function*() {
        const model = yield* FakeModel.make({ replies: [FakeModel.text("First answer."), FakeModel.text("Second answer.")] })
        const a = yield* ClaudeCli.offlineDirs("skein-store-a-")
        const url = (yield* Harness.storeUrlFor(Path.join(a.root, "shared"), backing))!
        const first = yield* Scope.make()
        const serverA = yield* Harness.start(model, { dirs: a, store: url }).pipe(Scope.extend(first))
        const before = yield* Effect.promise(async () => {
          const client = createOpencodeClient({ baseUrl: serverA.url, headers: serverA.headers, directory: a.cwd })
          const session = (await client.session.create({ title: "moved" })).data!
          await client.session.prompt({ sessionID: session.id, parts: [{ type: "text", text: "one" }] })
          return session
        })
        const cliSessionId = (yield* serverA.registry.get(before.id)).cliSessionId
        // Read the moment the prompt answered: the store holds the turn already.
        const atEnd = yield* mirrored(url, cliSessionId)
        expect(atEnd.toString()).toContain("First answer.")
        expect(Fs.readFileSync(transcriptIn(a.configDir, cliSessionId)!).subarray(0, atEnd.length).equals(atEnd)).toBe(true)
        const messagesA = yield* Effect.promise(async () => {
          const client = createOpencodeClient({ baseUrl: serverA.url, headers: serverA.headers, directory: a.cwd })
          return (await client.session.messages({ sessionID: before.id })).data!
        })
        yield* Scope.close(first, Exit.void)

        // Another machine with the same checkout: the project folder is the same, the config dir is empty.
        const b = { ...(yield* ClaudeCli.offlineDirs("skein-store-b-")), cwd: a.cwd }
        const serverB = yield* Harness.start(model, { dirs: b, store: url })
        const result = yield* Effect.promise(async () => {
          const client = createOpencodeClient({ baseUrl: serverB.url, headers: serverB.headers, directory: a.cwd })
          const listed = (await client.session.list()).data!
          const messages = (await client.session.messages({ sessionID: before.id })).data!
          const reply = (await client.session.prompt({ sessionID: before.id, parts: [{ type: "text", text: "two" }] })).data!
          return { listed, messages, reply }
        })
        expect(result.listed.map((s) => [s.id, s.title])).toContainEqual([before.id, "moved"])
        expect(result.messages.map((m) => [m.info.id, m.info.role, text(m.parts)])).toEqual(
          messagesA.map((m) => [m.info.id, m.info.role, text(m.parts)])
        )
        expect(text(result.reply.parts)).toEqual(["Second answer."])
        const second = yield* model.awaitRequest(1, FakeModel.isConversation)
        expect(FakeModel.messagesText(second)).toContain("First answer.")
        // The fork is skein's own write: it reaches the store too.
        const fork = yield* serverB.registry.fork(before.id, {})
        const forked = yield* mirrored(url, fork.cliSessionId)
        expect(forked.toString()).toContain("Second answer.")
      }))

    it.scopedLive("asks an earlier run left open are closed as rejected by a host restart and published; a reply to them, or to an unknown id, is 404", () =>
      Effect.gen(function*() {
        const dirs = yield* ClaudeCli.offlineDirs("skein-store-asks-")
        const url = (yield* Harness.storeUrlFor(Path.join(dirs.root, "shared"), backing))!
        const earlier = yield* SqlStore.make(yield* StoreUrl.parse(url))
        const ledger = yield* AskLedger.make().pipe(Effect.provideService(SqlStore.SqlStore, earlier))
        const cliSessionId = "0b5e55ed-0000-4000-8000-000000000001"
        const sessionID = "ses_orphaned"
        yield* ledger.open({
          id: "per_orphan",
          kind: "permission",
          cliSessionId,
          requestId: "req-1",
          directory: dirs.cwd,
          request: { id: "per_orphan", sessionID, permission: "bash", patterns: ["rm -rf /"], metadata: {}, always: [] }
        })
        yield* ledger.open({
          id: "que_orphan",
          kind: "question",
          cliSessionId,
          requestId: "req-2",
          directory: dirs.cwd,
          request: { id: "que_orphan", sessionID, questions: [] }
        })
        const server = yield* Harness.start(undefined, { dirs, store: url })
        const seen = yield* eventsUntil(server, (type, p) => type === "question.replied" && p["requestID"] === "que_orphan")
        expect(seen.filter((e) => e.type.endsWith(".replied")).map((e) => e.properties)).toEqual([
          { sessionID, requestID: "per_orphan", reply: "reject", reason: "host restarted" },
          { sessionID, requestID: "que_orphan", reply: "reject", reason: "host restarted", answers: [] }
        ])
        expect(yield* ledger.pending()).toEqual([])
        expect((yield* post(server, "/permission/per_orphan/reply", { reply: "once" })).status).toBe(404)
        expect((yield* post(server, "/question/que_orphan/reply", { answers: [["yes"]] })).status).toBe(404)
        expect((yield* post(server, "/permission/per_never/reply", { reply: "once" })).status).toBe(404)
        expect((yield* post(server, `/session/${sessionID}/permissions/per_orphan`, { response: "once" })).status).toBe(404)
      }))
  })

suite("sqlite")
suite("postgres")

describe("skein serve without a store", () => {
  it.scopedLive("a reply to an unknown permission or question id is 404, not 200", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined, { store: null })
      expect((yield* post(server, "/permission/per_unknown/reply", { reply: "once" })).status).toBe(404)
      expect((yield* post(server, "/session/ses_unknown/permissions/per_unknown", { response: "always" })).status).toBe(404)
      expect((yield* post(server, "/question/que_unknown/reply", { answers: [["a"]] })).status).toBe(404)
    }))
})

describe("skein serve --store (postgres) losing its database", () => {
  it.scopedLive("a restart mid-session: events are held and follow with a session.error, the CLI's file is intact, the mirror catches up", () =>
    Effect.gen(function*() {
      const pg = yield* Postgres.start()
      const url = Redacted.value(yield* pg.database("lost"))
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Before the outage."), FakeModel.text("During the outage.")] })
      const server = yield* Harness.start(model, { store: url })
      const session = yield* server.registry.create({ directory: server.dirs.cwd, title: "outage" })
      yield* server.registry.prompt(session.id, "one")
      const file = transcriptIn(server.dirs.configDir, session.cliSessionId)!

      yield* pg.stop
      const accepted = yield* post(server, `/session/${session.id}/prompt_async`, { parts: [{ type: "text", text: "two" }] })
      expect(accepted.status).toBe(204)
      // The CLI goes on and writes its own transcript meanwhile.
      yield* Effect.sync(() => Fs.readFileSync(file, "utf8")).pipe(
        Effect.repeat({ schedule: Schedule.spaced("200 millis"), until: (content) => content.includes("During the outage.") }),
        Effect.timeout("60 seconds")
      )
      yield* pg.start

      let idles = 0
      const seen = yield* eventsUntil(server, (type, p) => type === "session.idle" && p["sessionID"] === session.id && ++idles === 2)
      const errors = seen.filter((e) => e.type === "session.error").map((e) => e.properties["error"] as { name: string })
      expect(errors.map((e) => e.name)).toContain("StoreFailed")
      expect(Fs.readFileSync(file, "utf8")).toContain("During the outage.")
      // The mirror catches up from its offset once the database is back.
      const caughtUp = yield* mirrored(url, session.cliSessionId).pipe(
        Effect.tap(() => Effect.sleep("300 millis")),
        Effect.repeat({ while: (bytes) => !bytes.toString().includes("During the outage.") }),
        Effect.timeout("60 seconds")
      )
      expect(Fs.readFileSync(file).subarray(0, caughtUp.length).equals(caughtUp)).toBe(true)
    }))
})
