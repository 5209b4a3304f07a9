/**
 * opencode's TUI (`opencode attach <url>`) against skein serve, under tmux on
 * a private socket: a typed prompt gets the model's reply, streamed by the
 * real CLI from FakeModel, on the screen: the prompt once, then the reply
 * once, with the footer the TUI writes under a finished turn. A tool the CLI
 * asks permission for shows the TUI's own prompt, and "Allow once" runs it;
 * the TUI then draws the call with its own views (a command with its output,
 * an edit as a diff), not its generic row. Esc twice interrupts a streaming
 * reply, which the TUI then marks.
 */
import { describe, expect, it } from "@effect/vitest"
import { FakeModel, Opencode } from "@skein/testkit"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Harness from "./harness.js"

const count = (pane: string, text: string) => pane.split(text).length - 1

/** The messages' column of a 160-column pane; the sidebar (title, context, cost) is to its right. */
const messagesOf = (pane: string) => pane.split("\n").map((line) => [...line].slice(0, 110).join("")).join("\n")
const sidebarOf = (pane: string) => pane.split("\n").map((line) => [...line].slice(110).join("")).join("\n")

/** The footer under a finished reply: agent, model and the turn's duration. */
const finished = /▣\s+Build · \S+ · \d/

const tmux = (socket: string, args: ReadonlyArray<string>) => ChildProcess.execFileSync("tmux", ["-L", socket, ...args], { encoding: "utf8" })

/** Polls the pane until `found` holds, for at most `tries` × 250 ms. */
const waitForPane = (socket: string, found: (pane: string) => boolean, tries: number) =>
  Effect.gen(function*() {
    let pane = ""
    for (let i = 0; i < tries; i++) {
      pane = tmux(socket, ["capture-pane", "-p", "-t", "tui"])
      if (found(pane)) return pane
      yield* Effect.sleep("250 millis")
    }
    return pane
  })

/** `opencode attach` to `server` in a tmux session of its own, ready for input; its socket. */
const attach = (server: Harness.Running, modelUrl: string) =>
  Effect.gen(function*() {
    const { env } = Opencode.offline({ root: server.dirs.root, cwd: server.dirs.cwd, modelUrl, password: Harness.token })
    const socket = `skein-tui-${process.pid}-${Date.now()}`
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        tmux(socket, [
          "new-session", "-d", "-s", "tui", "-x", "160", "-y", "45", "-c", server.dirs.cwd,
          ...Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]),
          Opencode.binary, "attach", server.url
        ])
      ),
      // Only this test's tmux server, on its own socket.
      () => Effect.sync(() => tmux(socket, ["kill-server"]))
    )
    const ready = yield* waitForPane(socket, (pane) => /ctrl\+p|tab|agents?|build/i.test(pane), 120)
    expect(ready).toMatch(/ctrl\+p|tab|agents?|build/i)
    return socket
  })

const type = (socket: string, text: string) => {
  tmux(socket, ["send-keys", "-t", "tui", "-l", text])
  tmux(socket, ["send-keys", "-t", "tui", "Enter"])
}

/** The TUI's permission prompt, once it shows: the tool's own view, not "⚙ Call tool …". */
const permissionPrompt = (socket: string) =>
  Effect.gen(function*() {
    const asked = yield* waitForPane(socket, (p) => p.includes("Permission required") && p.includes("Allow once"), 240)
    expect(asked).toContain("Allow once")
    expect(asked).not.toContain("Call tool")
    return asked
  })

/** Picks the prompt's first choice, "Allow once", which is selected. */
const allowOnce = (socket: string) => tmux(socket, ["send-keys", "-t", "tui", "Enter"])

/** Types `prompt`; the prompt for the tool it asks for must match `ask`; allows once; the messages once `reply` is done. */
const promptAllowing = (socket: string, prompt: string, ask: RegExp, reply: string) =>
  Effect.gen(function*() {
    type(socket, prompt)
    expect(yield* permissionPrompt(socket)).toMatch(ask)
    allowOnce(socket)
    return yield* afterReply(socket, reply)
  })

/** The messages' column once `reply` has its turn's footer under it. */
const afterReply = (socket: string, reply: string) => {
  const done = new RegExp(`${reply.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s*\\n\\s*▣\\s+Build · \\S+ · \\d`)
  return Effect.map(waitForPane(socket, (p) => done.test(p), 240), messagesOf)
}

describe("opencode attach (the TUI) against skein serve", () => {
  it.scopedLive("typed prompts show once each, each above its streamed reply", () =>
    Effect.gen(function*() {
      const reply = "Streamed to the opencode TUI by skein."
      const second = "A second answer, below the first."
      const model = yield* FakeModel.make({ replies: [FakeModel.text(reply), FakeModel.text(second)] })
      const server = yield* Harness.start(model)
      const socket = yield* attach(server, model.url)
      const prompt = "Say hello to the TUI"
      type(socket, prompt)
      const shown = yield* waitForPane(socket, (p) => p.includes(reply) && finished.test(p), 240)
      const pane = messagesOf(shown)
      expect(pane).toMatch(finished)
      expect(count(pane, prompt)).toBe(1)
      expect(count(pane, reply)).toBe(1)
      expect(pane.indexOf(prompt)).toBeLessThan(pane.indexOf(reply))
      // The session had opencode's default title: its first prompt names it.
      yield* waitForPane(socket, (p) => sidebarOf(p).includes(prompt), 40)
      expect(sidebarOf(tmux(socket, ["capture-pane", "-p", "-t", "tui"]))).toContain(prompt)
      const next = "And once more"
      type(socket, next)
      const after = messagesOf(yield* waitForPane(socket, (p) => p.includes(second) && p.match(new RegExp(finished, "g"))?.length === 2, 240))
      const order = [prompt, reply, next, second]
      for (const text of order) expect(count(after, text)).toBe(1)
      expect(order.map((text) => after.indexOf(text))).toEqual(order.map((text) => after.indexOf(text)).sort((a, b) => a - b))
    }), { timeout: 120_000 })

  it.scopedLive("a tool that needs permission shows the TUI's prompt; Allow once runs it", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.combine(FakeModel.text("Let me make it."), FakeModel.toolUse("Bash", { command: "touch made-in-the-tui.txt && echo made", description: "Create a file" })),
          FakeModel.text("The file is there.")
        ]
      })
      const server = yield* Harness.start(model)
      const socket = yield* attach(server, model.url)
      type(socket, "Make the file")
      // The TUI's shell prompt, with the command.
      const asked = yield* permissionPrompt(socket)
      expect(asked).toContain("Shell command")
      expect(asked).toContain("$ touch made-in-the-tui.txt && echo made")
      const made = Path.join(server.dirs.cwd, "made-in-the-tui.txt")
      expect(Fs.existsSync(made)).toBe(false)
      allowOnce(socket)
      const done = yield* afterReply(socket, "The file is there.")
      expect(done).not.toContain("Permission required")
      expect(Fs.existsSync(made)).toBe(true)
      // The TUI's bash view: the command and what it printed, not "⚙ Bash [command=…]".
      expect(done).toContain("$ touch made-in-the-tui.txt && echo made")
      expect(done).toMatch(/^\s*┃?\s*made\s*$/m)
      expect(done).not.toContain("⚙")
    }), { timeout: 120_000 })

  it.scopedLive("an edit shows as the TUI's diff of the file", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make()
      const server = yield* Harness.start(model)
      const file = Path.join(server.dirs.cwd, "notes.txt")
      Fs.writeFileSync(file, "alpha\nbeta\n")
      yield* model.enqueue(
        // The CLI edits only a file it has read in this session.
        FakeModel.toolUse("Read", { file_path: file }),
        FakeModel.toolUse("Edit", { file_path: file, old_string: "beta", new_string: "gamma" }),
        FakeModel.text("Edited.")
      )
      const socket = yield* attach(server, model.url)
      // The TUI's edit prompt names the file.
      const done = yield* promptAllowing(socket, "Edit the notes", /Edit \S*notes\.txt/, "Edited.")
      expect(Fs.readFileSync(file, "utf8")).toBe("alpha\ngamma\n")
      // The read and the edit under their own views; the edit as a diff with line numbers.
      expect(done).toContain("→ Read notes.txt")
      expect(done).toContain("← Edit notes.txt")
      expect(done).toMatch(/1\s+alpha/)
      expect(done).toMatch(/2 - beta/)
      expect(done).toMatch(/2 \+ gamma/)
      expect(done).not.toContain("⚙")
    }), { timeout: 120_000 })

  it.scopedLive("a new file asks as the TUI's edit prompt, then shows as written with its content", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make()
      // Write is offered only without --bare.
      const server = yield* Harness.start(model, { bare: false })
      const file = Path.join(server.dirs.cwd, "plan.md")
      yield* model.enqueue(
        FakeModel.toolUse("Write", { file_path: file, content: "first step\nsecond step\n" }),
        FakeModel.text("Written.")
      )
      const socket = yield* attach(server, model.url)
      // A new file asks as an edit, as opencode's own write does.
      const done = yield* promptAllowing(socket, "Write the plan", /Edit \S*plan\.md/, "Written.")
      expect(Fs.readFileSync(file, "utf8")).toBe("first step\nsecond step\n")
      expect(done).toMatch(/Wrote \S*plan\.md/)
      expect(done).toMatch(/1\s+first step/)
      expect(done).toMatch(/2\s+second step/)
      expect(done).not.toContain("⚙")
    }), { timeout: 120_000 })

  it.scopedLive("Esc twice interrupts a streaming reply: it stops, shows as interrupted, and the next prompt is answered", () =>
    Effect.gen(function*() {
      const words = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")
      const model = yield* FakeModel.make({
        replies: [FakeModel.withDelay(FakeModel.text(`Streaming slowly: ${words} THE-END`), "150 millis"), FakeModel.text("After the interrupt.")]
      })
      const server = yield* Harness.start(model)
      const socket = yield* attach(server, model.url)
      type(socket, "Stream slowly")
      yield* waitForPane(socket, (p) => p.includes("word3"), 240)
      tmux(socket, ["send-keys", "-t", "tui", "Escape"])
      yield* waitForPane(socket, (p) => p.includes("esc again"), 40)
      tmux(socket, ["send-keys", "-t", "tui", "Escape"])
      const stopped = yield* waitForPane(socket, (p) => /▣\s+Build · \S+ · interrupted/.test(p), 80)
      expect(stopped).toMatch(/▣\s+Build · \S+ · interrupted/)
      type(socket, "Again")
      const after = yield* waitForPane(socket, (p) => p.includes("After the interrupt.") && finished.test(p), 240)
      expect(after).toContain("After the interrupt.")
      // The interrupted reply never finished, and keeps its mark above the next turn.
      expect(after).not.toContain("THE-END")
      expect(after).toMatch(/▣\s+Build · \S+ · interrupted/)
    }), { timeout: 120_000 })
})
