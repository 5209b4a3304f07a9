import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { expect, layer } from "@effect/vitest"
import { Anthropic } from "@skein/protocol"
import { ResumeLoader } from "@skein/store"
import { Effect, Exit, FastCheck, Option } from "effect"
import * as Path from "node:path"
import * as Scan from "../src/internal/backwardScan.js"
import * as E from "./fixtures/entries.js"

const write = (lines: ReadonlyArray<E.Line | string>, name = "session.jsonl") =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "skein-resume-" })
    const path = Path.join(dir, name)
    yield* fs.writeFileString(path, E.jsonl(lines))
    return path
  })

const texts = (conversation: ResumeLoader.Conversation) =>
  conversation.messages.map((message) =>
    typeof message.content === "string"
      ? `${message.role}:${message.content}`
      : `${message.role}:${message.content.map((block) => "text" in block ? block.text : block.type).join("|")}`
  )

const uuids = (conversation: ResumeLoader.Conversation) => conversation.entries.map((entry) => entry.uuid)

const tags = (conversation: ResumeLoader.Conversation) => conversation.diagnostics.map((d) => d._tag)

/** A compacted session: two turns, a boundary preserving the last answer, then one more turn. */
const compacted = (padding: number) => [
  E.user("u1", null, "first question"),
  E.assistant("a1", "u1", "answer one", { usage: E.usage(1000, 100) }),
  E.blob("x".repeat(padding)),
  E.user("u2", "a1", "second question"),
  E.assistant("a2", "u2", "answer two", { usage: E.usage(2000, 200) }),
  E.blob("y".repeat(padding)),
  E.title("early title"),
  E.lastPrompt("a2", "second question"),
  E.boundary("b1", "a2", { head: "a2", tail: "a2", anchor: "s1", uuids: ["a2"] }),
  E.summary("s1", "b1"),
  E.user("c1", "s1", "<command-name>/compact</command-name>"),
  E.user("u3", "c1", "after compact"),
  E.attachment("t1", "u3"),
  E.assistant("a3", "t1", "answer three", { usage: E.usage(300, 30) }),
  E.lastPrompt("a3", "after compact")
]

layer(NodeContext.layer)("ResumeLoader", (it) => {
  it.scoped("a transcript without a boundary loads whole, leaf from last-prompt", () =>
    Effect.gen(function*() {
      const path = yield* write([
        E.user("u1", null, "hello"),
        E.attachment("t1", "u1"),
        E.assistant("a1", "t1", "hi there"),
        E.lastPrompt("a1", "hello")
      ])
      const view = yield* ResumeLoader.load(path)
      expect(Option.isNone(view.boundary)).toBe(true)
      expect(uuids(view)).toEqual(["u1", "t1", "a1"])
      expect(texts(view)).toEqual(["user:hello", "assistant:hi there"])
      expect(view.messages[0]).toEqual({ role: "user", content: "hello" })
      expect(view.leafUuid).toBe("a1")
      expect(view.sessionId).toBe(E.SESSION)
      expect(view.diagnostics).toEqual([])
      expect(view.stats.tailOffset).toBe(0)
    }))

  it.scoped("starts at the last boundary, splices the preserved segment after the summary", () =>
    Effect.gen(function*() {
      const path = yield* write(compacted(1000))
      const view = yield* ResumeLoader.load(path)
      expect(Option.map(view.boundary, (b) => b.uuid)).toEqual(Option.some("b1"))
      expect(uuids(view)).toEqual(["b1", "s1", "a2", "c1", "u3", "t1", "a3"])
      expect(texts(view)).toEqual([
        "user:Summary of the earlier conversation.",
        "assistant:answer two",
        "user:<command-name>/compact</command-name>\n|after compact",
        "assistant:answer three"
      ])
      expect(view.diagnostics).toEqual([
        { _tag: "Relinked", uuid: "c1", from: "s1", to: "a2", reason: "preservedSegment" },
        { _tag: "Relinked", uuid: "a2", from: "u2", to: "s1", reason: "preservedSegment" }
      ])
      // The prefix was never decoded in full: only its metadata window.
      expect(view.metadata.customTitle).toBe("early title")
      expect(view.metadata.lastPrompt).toBe("after compact")
      expect(view.stats.tailOffset).toBeGreaterThan(2000)
    }))

  it.scoped("the last of several boundaries wins", () =>
    Effect.gen(function*() {
      const path = yield* write([
        E.user("u1", null, "one"),
        E.boundary("b1", "u1"),
        E.summary("s1", "b1", "first summary"),
        E.assistant("a1", "s1", "reply"),
        E.boundary("b2", "a1"),
        E.summary("s2", "b2", "second summary"),
        E.assistant("a2", "s2", "latest")
      ])
      const view = yield* ResumeLoader.load(path)
      expect(uuids(view)).toEqual(["b2", "s2", "a2"])
      expect(view.leafUuid).toBe("a2")
    }))

  it.scoped("a line that only mentions compact_boundary is not a boundary", () =>
    Effect.gen(function*() {
      const path = yield* write([
        E.user("u1", null, "what is a \"compact_boundary\"?"),
        E.assistant("a1", "u1", "a \"compact_boundary\" marks compaction"),
        E.blob("\"compact_boundary\"")
      ])
      const view = yield* ResumeLoader.load(path)
      expect(Option.isNone(view.boundary)).toBe(true)
      expect(uuids(view)).toEqual(["u1", "a1"])
    }))

  it.scoped("finds the boundary across block borders, for every block size", () =>
    Effect.gen(function*() {
      const path = yield* write(compacted(300))
      const reference = yield* ResumeLoader.load(path)
      for (const blockSize of [1, 2, 7, 64, 100, 333, 1024, 4096]) {
        const view = yield* ResumeLoader.load(path, { blockSize })
        expect(uuids(view)).toEqual(uuids(reference))
        expect(view.metadata).toEqual(reference.metadata)
        expect(view.stats.tailOffset).toBe(reference.stats.tailOffset)
      }
    }))

  it.scoped("relinks an entry cut from its parent through logicalParentUuid", () =>
    Effect.gen(function*() {
      const path = yield* write([
        E.user("u1", null, "question"),
        E.assistant("a1", "u1", "answer"),
        { ...E.user("u2", null, "follow-up"), logicalParentUuid: "a1" },
        E.assistant("a2", "u2", "second answer")
      ])
      const view = yield* ResumeLoader.load(path)
      expect(uuids(view)).toEqual(["u1", "a1", "u2", "a2"])
      expect(view.diagnostics).toEqual([{ _tag: "Relinked", uuid: "u2", from: null, to: "a1", reason: "logicalParent" }])
    }))

  it.scoped("chooses the leaf from the latest last-prompt, and follows a turn written after it", () =>
    Effect.gen(function*() {
      const branches = [
        E.user("u1", null, "root"),
        E.assistant("a1", "u1", "root answer"),
        E.user("x1", "a1", "branch x"),
        E.assistant("x2", "x1", "x answer"),
        E.user("y1", "a1", "branch y"),
        E.assistant("y2", "y1", "y answer")
      ]
      const onX = yield* ResumeLoader.load(yield* write([...branches, E.lastPrompt("y2"), E.lastPrompt("x2")]))
      expect(uuids(onX)).toEqual(["u1", "a1", "x1", "x2"])
      // A cut-off turn after last-prompt: its newest descendant is resumed.
      const cut = yield* ResumeLoader.load(yield* write([...branches, E.lastPrompt("x2"), E.user("x3", "x2", "interrupted")]))
      expect(cut.leafUuid).toBe("x3")
      // No last-prompt: the last chain entry.
      const none = yield* ResumeLoader.load(yield* write(branches))
      expect(none.leafUuid).toBe("y2")
      // A last-prompt naming a missing message falls back, with a diagnostic.
      const missing = yield* ResumeLoader.load(yield* write([...branches, E.lastPrompt("gone")]))
      expect(missing.leafUuid).toBe("y2")
      expect(missing.diagnostics).toEqual([{ _tag: "LeafNotFound", leafUuid: "gone" }])
    }))

  it.scoped("an orphan becomes the root, with a diagnostic", () =>
    Effect.gen(function*() {
      const path = yield* write([
        E.user("u2", "lost", "my parent is gone"),
        E.assistant("a2", "u2", "answer")
      ])
      const view = yield* ResumeLoader.load(path)
      expect(uuids(view)).toEqual(["u2", "a2"])
      expect(view.diagnostics).toEqual([{ _tag: "Orphan", uuid: "u2", parentUuid: "lost" }])
    }))

  it.scoped("a cycle is broken, with a diagnostic", () =>
    Effect.gen(function*() {
      const path = yield* write([
        E.user("u1", "a2", "one"),
        E.assistant("a1", "u1", "two"),
        E.user("u2", "a1", "three"),
        E.assistant("a2", "u2", "four")
      ])
      const view = yield* ResumeLoader.load(path)
      expect(uuids(view)).toEqual(["u1", "a1", "u2", "a2"])
      expect(view.diagnostics).toEqual([{ _tag: "Cycle", uuid: "a2" }])
    }))

  it.scoped("resumeAt truncates the view at a message; one outside the view fails", () =>
    Effect.gen(function*() {
      const path = yield* write(compacted(100))
      const view = yield* ResumeLoader.load(path, { resumeAt: "u3" })
      expect(uuids(view)).toEqual(["b1", "s1", "a2", "c1", "u3"])
      expect(view.leafUuid).toBe("u3")
      // u1 lies before the boundary: a resumed CLI never sees it.
      const before = yield* Effect.exit(ResumeLoader.load(path, { resumeAt: "u1" }))
      expect(before).toEqual(Exit.fail(new ResumeLoader.ResumeAtNotFound({ path, uuid: "u1" })))
    }))

  it.scoped("usage counts only what followed the boundary, each API message once", () =>
    Effect.gen(function*() {
      const path = yield* write([
        ...compacted(10).slice(0, -1),
        E.assistant("a4", "a3", "more of the same message", { id: "msg_a3", usage: E.usage(300, 30) }),
        E.lastPrompt("a4")
      ])
      const view = yield* ResumeLoader.load(path)
      expect(view.usage).toEqual({
        input_tokens: 300,
        output_tokens: 30,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0
      })
      const preserved = view.entries.find((entry) => entry.uuid === "a2")
      expect(preserved?.type === "assistant" && preserved.message.usage.input_tokens).toBe(0)
    }))

  it.scoped("tolerates malformed lines, unknown entries, sidechains and a torn last line", () =>
    Effect.gen(function*() {
      const path = yield* write([
        E.user("u1", null, "hello"),
        "{not json",
        { type: "user", uuid: "bad" },
        E.blob("bookkeeping"),
        { ...E.assistant("sc", "u1", "side work"), isSidechain: true },
        E.assistant("a1", "u1", "hi"),
        "{\"type\":\"assistant\",\"uuid\":\"torn"
      ])
      const view = yield* ResumeLoader.load(path)
      expect(uuids(view)).toEqual(["u1", "a1"])
      expect(tags(view)).toEqual(["Unparseable", "Malformed", "Unparseable"])
      expect(view.unknownTypes).toEqual({ "api-request-blob": 1 })
    }))

  it.scoped("with a model, drops thinking blocks another model wrote, as the CLI does", () =>
    Effect.gen(function*() {
      const thinkingOf = (uuid: string, parent: string | null, model: string): E.Line => {
        const base = E.assistant(uuid, parent, "visible", { id: `msg_${uuid}` })
        const message = base["message"]
        return {
          ...base,
          message: {
            ...(typeof message === "object" ? message : {}),
            model,
            content: [{ type: "thinking", thinking: "hidden", signature: "sig" }, { type: "text", text: "visible" }]
          }
        }
      }
      const path = yield* write([
        E.user("u1", null, "q1"),
        thinkingOf("a1", "u1", "model-old"),
        E.user("u2", "a1", "q2"),
        thinkingOf("a2", "u2", "model-new")
      ])
      const all = yield* ResumeLoader.load(path)
      expect(texts(all)).toEqual(["user:q1", "assistant:hidden|visible", "user:q2", "assistant:hidden|visible"].map((t) =>
        t.replace("hidden", "thinking")
      ))
      const forNew = yield* ResumeLoader.load(path, { model: "model-new" })
      expect(texts(forNew)).toEqual(["user:q1", "assistant:visible", "user:q2", "assistant:thinking|visible"])
      expect(forNew.entries).toEqual(all.entries)
    }))

  it.scoped("loads a subagent transcript with sidechain: true", () =>
    Effect.gen(function*() {
      const path = yield* write([
        { ...E.user("s1", null, "subtask"), isSidechain: true, agentId: "a1" },
        { ...E.assistant("s2", "s1", "done"), isSidechain: true, agentId: "a1" }
      ])
      expect(uuids(yield* ResumeLoader.load(path))).toEqual([])
      expect(texts(yield* ResumeLoader.load(path, { sidechain: true }))).toEqual(["user:subtask", "assistant:done"])
    }))

  it.scoped("a missing file is TranscriptNotFound", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(ResumeLoader.load("/nonexistent/skein/session.jsonl"))
      expect(exit).toEqual(Exit.fail(new ResumeLoader.TranscriptNotFound({ path: "/nonexistent/skein/session.jsonl" })))
    }))
})

layer(NodeContext.layer)("backwardScan", (it) => {
  it.scoped("hands out exactly the marked lines, last first, with their offsets, for any block size", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "skein-scan-" })
      const marker = new TextEncoder().encode("MARK")
      const property = FastCheck.asyncProperty(
        FastCheck.array(FastCheck.tuple(FastCheck.boolean(), FastCheck.string({ maxLength: 40 })), { maxLength: 30 }),
        FastCheck.integer({ min: 1, max: 64 }),
        FastCheck.boolean(),
        async (rows, blockSize, trailingNewline) => {
          const lines = rows.map(([marked, text]) => (marked ? `${text}MARK${text}` : text).replaceAll("\n", " "))
          const content = lines.join("\n") + (trailingNewline ? "\n" : "")
          const bytes = new TextEncoder().encode(content)
          const expected: Array<{ offset: number; text: string }> = []
          let offset = 0
          for (const line of lines) {
            const length = new TextEncoder().encode(line).length
            if (line.includes("MARK")) expected.push({ offset, text: line })
            offset += length + 1
          }
          expected.reverse()
          const path = Path.join(dir, "scan.jsonl")
          const found = await Effect.runPromise(
            Effect.gen(function*() {
              yield* fs.writeFile(path, bytes)
              return yield* Effect.scoped(Effect.gen(function*() {
                const file = yield* fs.open(path)
                const out: Array<{ offset: number; text: string }> = []
                yield* Scan.scanBackward(file, {
                  end: bytes.length,
                  blockSize,
                  maxLineBytes: 1 << 20,
                  markers: [marker],
                  onLine: (line) => {
                    out.push({ offset: line.offset, text: new TextDecoder().decode(line.bytes) })
                    return false
                  }
                })
                return out
              }))
            }).pipe(Effect.provideService(FileSystem.FileSystem, fs))
          )
          expect(found).toEqual(expected)
        }
      )
      yield* Effect.promise(() => FastCheck.assert(property, { numRuns: 200 }))
    }))

  it.scoped("skips lines longer than maxLineBytes, and keeps going past them", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "skein-scan-" })
      const path = Path.join(dir, "long.jsonl")
      const content = ["MARK early", `MARK ${"z".repeat(500)}`, "MARK late"].join("\n") + "\n"
      yield* fs.writeFileString(path, content)
      const found: Array<string> = []
      const result = yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(path)
        return yield* Scan.scanBackward(file, {
          end: content.length,
          blockSize: 16,
          maxLineBytes: 100,
          markers: [new TextEncoder().encode("MARK")],
          onLine: (line) => {
            found.push(new TextDecoder().decode(line.bytes))
            return false
          }
        })
      }))
      expect(found).toEqual(["MARK late", "MARK early"])
      expect(result.oversized).toBe(1)
    }))
})

layer(NodeContext.layer)("ResumeLoader over a real CLI transcript with parallel tool calls", (it) => {
  it.effect("both tool results are on the view, after the message that called them, as the CLI resumes it", () =>
    Effect.gen(function*() {
      const path = Path.join(import.meta.dirname, "..", "..", "protocol", "test", "fixtures", "two-tools.transcript.jsonl")
      const view = yield* ResumeLoader.load(path)
      const resultIds = view.messages.flatMap((message) =>
        typeof message.content === "string"
          ? []
          : message.content.flatMap((block) => Anthropic.isKnownBlock(block) && block.type === "tool_result" ? [block.tool_use_id] : [])
      )
      const useIds = view.messages.flatMap((message) =>
        typeof message.content === "string"
          ? []
          : message.content.flatMap((block) => Anthropic.isKnownBlock(block) && block.type === "tool_use" ? [block.id] : [])
      )
      expect(useIds).toHaveLength(2)
      // Every tool_use has its result, in the order of the calls, in the user message right after the assistant's.
      expect(resultIds).toEqual(useIds)
      const callAt = view.messages.findIndex((m) => typeof m.content !== "string" && m.content.some((b) => b.type === "tool_use"))
      const answer = view.messages[callAt + 1]
      expect(answer?.role).toBe("user")
      expect(typeof answer?.content === "string" ? [] : answer?.content.map((b) => b.type)).toEqual(["tool_result", "tool_result"])
    }))
})
