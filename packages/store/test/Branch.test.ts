import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { expect, layer } from "@effect/vitest"
import { Branch, ResumeLoader } from "@skein/store"
import { Effect, Exit, Option } from "effect"
import * as NodeFs from "node:fs"
import * as Path from "node:path"
import * as E from "./fixtures/entries.js"

const setup = (lines: ReadonlyArray<E.Line | string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "skein-branch-" })
    const path = Path.join(dir, `${E.SESSION}.jsonl`)
    yield* fs.writeFileString(path, E.jsonl(lines))
    return { dir, path }
  })

const readLines = (path: string): Array<Record<string, unknown>> =>
  NodeFs.readFileSync(path, "utf8").trim().split("\n").map((line) => {
    const value: unknown = JSON.parse(line)
    return typeof value === "object" && value !== null ? { ...value } : {}
  })

const session = [
  E.user("u1", null, "first"),
  E.assistant("a1", "u1", "one"),
  E.user("u2", "a1", "second"),
  E.attachment("t2", "u2"),
  E.assistant("a2", "t2", "two"),
  E.user("u3", "a2", "third"),
  E.assistant("a3", "u3", "three"),
  E.lastPrompt("a3", "third")
]

layer(NodeContext.layer)("Branch", (it) => {
  it.scoped("writes the chain up to the branch point with new ids, remapped parents and the new session id", () =>
    Effect.gen(function*() {
      const { dir, path } = yield* setup(session)
      const branched = yield* Branch.branch(path, { at: "a2" })
      expect(branched.path).toBe(Path.join(dir, `${branched.sessionId}.jsonl`))
      expect(branched.sessionId).not.toBe(E.SESSION)
      expect(branched.entries).toBe(5)
      expect(NodeFs.statSync(branched.path).mode & 0o777).toBe(0o600)

      const lines = readLines(branched.path)
      expect(lines[0]).toEqual({
        type: "skein-branch",
        sessionId: branched.sessionId,
        parentSessionId: E.SESSION,
        parentUuid: "a2",
        leafUuid: branched.header.leafUuid,
        timestamp: branched.header.timestamp
      })
      const chain = lines.slice(1, -1)
      expect(chain.map((line) => line["type"])).toEqual(["user", "assistant", "user", "attachment", "assistant"])
      for (const line of lines) expect(line["sessionId"]).toBe(branched.sessionId)
      const oldIds = new Set(["u1", "a1", "u2", "t2", "a2", "u3", "a3"])
      chain.forEach((line, index) => {
        expect(oldIds.has(String(line["uuid"]))).toBe(false)
        expect(line["parentUuid"]).toBe(index === 0 ? null : chain[index - 1]!["uuid"])
      })
      expect(lines[lines.length - 1]).toEqual({
        type: "last-prompt",
        lastPrompt: "second",
        leafUuid: chain[chain.length - 1]!["uuid"],
        sessionId: branched.sessionId
      })
      expect(branched.header.leafUuid).toBe(chain[chain.length - 1]!["uuid"])
      // The parent is untouched.
      expect(readLines(path).length).toBe(session.length)
    }))

  it.scoped("the branch loads to the parent's view at the branch point", () =>
    Effect.gen(function*() {
      const { path } = yield* setup(session)
      const branched = yield* Branch.branch(path, { at: "a2" })
      const parent = yield* ResumeLoader.load(path, { resumeAt: "a2" })
      const child = yield* ResumeLoader.load(branched.path)
      expect(child.messages).toEqual(parent.messages)
      expect(child.leafUuid).toBe(branched.header.leafUuid)
      expect(child.sessionId).toBe(branched.sessionId)
      expect(child.diagnostics).toEqual([])
      expect(child.unknownTypes).toEqual({ "skein-branch": 1 })
    }))

  it.scoped("a branch of a compacted session is a straight chain from its boundary", () =>
    Effect.gen(function*() {
      const { path } = yield* setup([
        E.user("u1", null, "old"),
        E.assistant("a1", "u1", "old answer"),
        E.boundary("b1", "a1", { head: "a1", tail: "a1", anchor: "s1", uuids: ["a1"] }),
        E.summary("s1", "b1"),
        E.user("u2", "s1", "new"),
        E.assistant("a2", "u2", "new answer")
      ])
      const branched = yield* Branch.branch(path, { at: "a2" })
      const lines = readLines(branched.path)
      const boundaryLine = lines[1]!
      expect(boundaryLine["subtype"]).toBe("compact_boundary")
      expect(boundaryLine["parentUuid"]).toBe(null)
      expect(boundaryLine).not.toHaveProperty("logicalParentUuid")
      expect(boundaryLine["compactMetadata"]).toEqual({ trigger: "manual", preTokens: 1000, postTokens: 200 })
      const parent = yield* ResumeLoader.load(path)
      const child = yield* ResumeLoader.load(branched.path)
      expect(child.messages).toEqual(parent.messages)
      expect(Option.isSome(child.boundary)).toBe(true)
      expect(child.diagnostics).toEqual([])
    }))

  it.scoped("a branch point outside the view fails and writes nothing", () =>
    Effect.gen(function*() {
      const { dir, path } = yield* setup(session)
      const exit = yield* Effect.exit(Branch.branch(path, { at: "nope", sessionId: "22222222-2222-4222-8222-222222222222" }))
      expect(exit).toEqual(Exit.fail(new ResumeLoader.ResumeAtNotFound({ path, uuid: "nope" })))
      expect(NodeFs.readdirSync(dir)).toEqual([`${E.SESSION}.jsonl`])
    }))

  it.scoped("refuses to overwrite an existing session", () =>
    Effect.gen(function*() {
      const { dir, path } = yield* setup(session)
      const id = "33333333-3333-4333-8333-333333333333"
      const existing = Path.join(dir, `${id}.jsonl`)
      NodeFs.writeFileSync(existing, "precious\n")
      const exit = yield* Effect.exit(Branch.branch(path, { at: "a1", sessionId: id }))
      expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error._tag).toBe("BranchWriteError")
      expect(NodeFs.readFileSync(existing, "utf8")).toBe("precious\n")
      expect(NodeFs.readdirSync(dir).sort()).toEqual([existing, path].map((p) => Path.basename(p)).sort())
    }))
})
