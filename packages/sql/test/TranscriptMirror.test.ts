import { expect } from "@effect/vitest"
import { SqlStore, StoreUrl, TranscriptMirror } from "@skein/sql"
import { Effect, Exit } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Backing, onBoth, tempDir } from "./backings.js"

const CLI = "22222222-2222-4222-8222-222222222222"
const project = "projects/-work-app"

const line = (o: Record<string, unknown>) => `${JSON.stringify(o)}\n`
const entry = (uuid: string, parentUuid: string | null, text: string, extra: Record<string, unknown> = {}) =>
  line({ type: "user", uuid, parentUuid, isSidechain: false, sessionId: CLI, timestamp: "2026-01-01T00:00:00.000Z", message: { role: "user", content: text }, ...extra })

/** Writes `text` at `rel` under `root` as the CLI does (0600 files, 0700 folders). */
const append = (root: string, rel: string, text: string | Buffer) => {
  const file = Path.join(root, rel)
  Fs.mkdirSync(Path.dirname(file), { recursive: true, mode: 0o700 })
  Fs.appendFileSync(file, text, { mode: 0o600 })
}

const filesUnder = (root: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (dir: string) => {
    for (const e of Fs.readdirSync(dir, { withFileTypes: true })) {
      const full = Path.join(dir, e.name)
      if (e.isDirectory()) walk(full)
      else out[Path.relative(root, full)] = Fs.readFileSync(full).toString("base64")
    }
  }
  walk(root)
  return out
}

const mirrorOn = (url: string) =>
  Effect.flatMap(Effect.flatMap(StoreUrl.parse(url), (u) => SqlStore.make(u)), (store) =>
    TranscriptMirror.make.pipe(Effect.provideService(SqlStore.SqlStore, store)))

onBoth((it, name) => {
  it.scoped(`${name}: mirror then restore into an empty config dir gives identical bytes (main chain, sidechain, compacted, summary)`, () =>
    Effect.gen(function*() {
      const url = yield* (yield* Backing).fresh
      const a = yield* tempDir("skein-cfg-a-")
      const b = yield* tempDir("skein-cfg-b-")
      const mirror = yield* mirrorOn(url)
      const main = `${project}/${CLI}.jsonl`
      const target = { configDir: a, cliSessionId: CLI, sessionId: "ses_x" }
      append(a, main, entry("u1", null, "first: héllo ✓"))
      yield* mirror.sync(target)
      // A subagent sidechain, its meta, session memory, then a compaction: boundary and summary appended.
      append(a, `${project}/${CLI}/subagents/agent-a1.jsonl`, entry("s1", null, "side", { isSidechain: true }))
      append(a, `${project}/${CLI}/subagents/agent-a1.meta.json`, JSON.stringify({ agentType: "general" }))
      append(a, `${project}/${CLI}/session-memory/summary.md`, "# Summary\nold\n")
      append(a, main, line({ type: "system", subtype: "compact_boundary", uuid: "b1", parentUuid: null, logicalParentUuid: "u1", compactMetadata: { trigger: "manual", preTokens: 100 } }))
      append(a, main, entry("u2", "b1", "Summary of the earlier conversation.", { isCompactSummary: true }))
      yield* mirror.sync(target)
      // summary.md is rewritten whole; the main chain ends on a torn line (the CLI killed mid-write).
      Fs.writeFileSync(Path.join(a, `${project}/${CLI}/session-memory/summary.md`), "# Summary\nnew\n", { mode: 0o600 })
      append(a, main, `{"type":"user","uuid":"u3","mess`)
      const report = yield* mirror.sync(target)
      expect(report.files.map((f) => f.path).sort()).toEqual([main, `${project}/${CLI}/session-memory/summary.md`])
      expect((yield* mirror.sync(target)).files).toEqual([])

      yield* mirror.restore(CLI, b)
      expect(filesUnder(b)).toEqual(filesUnder(a))
      expect(Fs.statSync(Path.join(b, main)).mode & 0o777).toBe(0o600)
      expect(Fs.statSync(Path.join(b, project)).mode & 0o777).toBe(0o700)
      expect(Fs.statSync(Path.join(b, `${project}/${CLI}/subagents`)).mode & 0o777).toBe(0o700)

      // The CLI on A finishes the torn line and goes on; B holds an older prefix and catches up by appending.
      append(a, main, `age":{}}\n${entry("u4", "u3", "more")}`)
      yield* mirror.sync(target)
      yield* mirror.restore(CLI, b)
      expect(filesUnder(b)).toEqual(filesUnder(a))
    }))

  it.scoped(`${name}: a file changed under the mirror is MirrorDiverged, never overwritten; restore of an unknown session fails typed`, () =>
    Effect.gen(function*() {
      const url = yield* (yield* Backing).fresh
      const a = yield* tempDir("skein-cfg-a-")
      const b = yield* tempDir("skein-cfg-b-")
      const mirror = yield* mirrorOn(url)
      const main = `${project}/${CLI}.jsonl`
      append(a, main, entry("u1", null, "one") + entry("u2", "u1", "two"))
      yield* mirror.sync({ configDir: a, cliSessionId: CLI })
      // Another writer rewrote the last line with the same length.
      const text = Fs.readFileSync(Path.join(a, main), "utf8")
      Fs.writeFileSync(Path.join(a, main), text.replace("two", "TWO"))
      const diverged = yield* Effect.flip(mirror.sync({ configDir: a, cliSessionId: CLI }))
      expect(diverged._tag).toBe("MirrorDiverged")
      // A file on B that is not a prefix of the mirror is left alone.
      append(b, main, entry("zz", null, "someone else's"))
      const onRestore = yield* Effect.flip(mirror.restore(CLI, b))
      expect(onRestore._tag).toBe("MirrorDiverged")
      expect(Fs.readFileSync(Path.join(b, main), "utf8")).toContain("someone else's")
      expect((yield* Effect.flip(mirror.restore("33333333-3333-4333-8333-333333333333", b)))._tag).toBe("TranscriptNotMirrored")
    }))

  if (name === "postgres") {
    it.scoped("postgres: a sync while the database is down fails typed; the next one catches up from the mirrored offset", () =>
      Effect.gen(function*() {
        const backing = yield* Backing
        const server = backing.server!
        const url = yield* backing.fresh
        const a = yield* tempDir("skein-cfg-a-")
        const b = yield* tempDir("skein-cfg-b-")
        const mirror = yield* mirrorOn(url)
        const main = `${project}/${CLI}.jsonl`
        append(a, main, entry("u1", null, "one"))
        yield* mirror.sync({ configDir: a, cliSessionId: CLI })
        yield* server.stop
        append(a, main, entry("u2", "u1", "two"))
        const down = yield* Effect.exit(mirror.sync({ configDir: a, cliSessionId: CLI }))
        yield* server.start
        expect(Exit.isFailure(down) && JSON.stringify(down.cause).includes("StoreFailed")).toBe(true)
        append(a, main, entry("u3", "u2", "three"))
        // The pool reconnects; the sync copies both lines the outage missed.
        yield* Effect.retry(mirror.sync({ configDir: a, cliSessionId: CLI }), { times: 20 })
        yield* mirror.restore(CLI, b)
        expect(filesUnder(b)).toEqual(filesUnder(a))
      }))
  }
})
