/**
 * The protocol decoders against what the real CLI writes right now: its
 * stdout, live, and the transcript it leaves on disk.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { CliMessage, HostMessage, Lenient, StreamJson, Transcript } from "@skein/protocol"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Chunk, Effect, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

const findJsonl = (dir: string): Array<string> =>
  fs.readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".jsonl"))
    .map((f) => path.join(dir, f))

describe("protocol against the real CLI", () => {
  it.scopedLive("decodes a live turn with a tool call, and its transcript, with no diagnostics", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.combine(FakeModel.thinking("Read the notes."), FakeModel.toolUse("Read", { file_path: "NOTES.md" })),
          FakeModel.text("The notes say: skein 🧶.")
        ]
      })
      const run = yield* ClaudeCli.spawn({
        baseUrl: model.url,
        args: [...ClaudeCli.streamJsonArgs, ...ClaudeCli.leanArgs, "--include-partial-messages", "--allowedTools", "Read"],
        env: { CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS: "1" }
      })
      fs.writeFileSync(path.join(run.cwd, "NOTES.md"), "skein 🧶\n")
      yield* run.send(HostMessage.user("What do the notes say?"))
      const decoded = Chunk.toReadonlyArray(
        yield* StreamJson.decodeStdout(run.stdout).pipe(
          Stream.tap((d) =>
            d._tag === "Message" && d.message.type === "system" && d.message.subtype === "session_state_changed" &&
              d.message.state === "idle"
              ? run.closeStdin
              : Effect.void
          ),
          Stream.runCollect
        )
      )
      expect(yield* run.exitCode).toBe(0)
      expect(decoded.filter(Lenient.isDiagnostic)).toEqual([])
      const messages = decoded.flatMap((d) => d._tag === "Message" ? [d.message] : [])
      const kinds = new Set(messages.map((m) => m.type))
      for (const kind of ["system", "stream_event", "assistant", "user", "result"]) expect(kinds).toContain(kind)
      const toolResult = messages.find((m): m is CliMessage.User => m.type === "user")
      expect(JSON.stringify(toolResult?.message.content)).toContain("skein")

      const files = findJsonl(path.join(run.configDir, "projects"))
      expect(files).toHaveLength(1)
      const entries = Lenient.decodeAll(Transcript.decoder, fs.readFileSync(files[0]!))
      expect(entries.filter(Lenient.isDiagnostic)).toEqual([])
      const chain = entries.flatMap((e) => e._tag === "Message" && Transcript.isChainEntry(e.message) ? [e.message] : [])
      expect(chain.map((e) => e.type)).toEqual(expect.arrayContaining(["user", "assistant"]))
      const uuids = new Set(chain.map((e) => e.uuid))
      for (const entry of chain) {
        if (entry.parentUuid !== null) expect(uuids.has(entry.parentUuid)).toBe(true)
      }
      const lastPrompt = entries.flatMap((e) => e._tag === "Message" && e.message.type === "last-prompt" ? [e.message] : [])
      expect(lastPrompt.at(-1)?.lastPrompt).toBe("What do the notes say?")
    }).pipe(Effect.provide(NodeContext.layer)))
})
