/**
 * Running the real CLI offline for compaction tests: FakeModel on 127.0.0.1,
 * a private CLAUDE_CONFIG_DIR, TMPDIR and cwd, non-essential traffic off.
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import type { Anthropic } from "@skein/protocol"
import type { Session } from "@skein/session"
import { TranscriptLayout, TranscriptStore } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer, Option, Ref, Stream } from "effect"
import * as Fs from "node:fs"
import * as TokenCounter from "../src/TokenCounter.js"

/**
 * Sends the prompts one turn at a time (each after the previous `result`),
 * then closes stdin and waits for the exit.
 */
export const converse = (options: {
  readonly model: FakeModel.FakeModel["Type"]
  readonly prompts: ReadonlyArray<string>
  readonly args?: ReadonlyArray<string>
  readonly configDir?: string | undefined
}) =>
  Effect.gen(function*() {
    const run = yield* ClaudeCli.spawn({
      baseUrl: options.model.url,
      args: [...ClaudeCli.streamJsonArgs, ...ClaudeCli.leanArgs, ...(options.args ?? [])],
      env: options.configDir === undefined ? undefined : { CLAUDE_CONFIG_DIR: options.configDir }
    })
    const next = yield* Ref.make(0)
    const results = yield* Ref.make<ReadonlyArray<unknown>>([])
    const sendNext = Effect.gen(function*() {
      const i = yield* Ref.getAndUpdate(next, (n) => n + 1)
      const prompt = options.prompts[i]
      yield* prompt === undefined ? run.closeStdin : Effect.orDie(run.send(ClaudeCli.userMessage(prompt)))
    })
    yield* sendNext
    yield* ClaudeCli.lines(run.stdout).pipe(
      Stream.runForEach((line) => {
        if (!line.startsWith("{")) return Effect.void
        const message: unknown = JSON.parse(line)
        const isResult = typeof message === "object" && message !== null && "type" in message && message.type === "result"
        return isResult ? Effect.zipRight(Ref.update(results, (r) => [...r, message]), sendNext) : Effect.void
      })
    )
    return { run, exitCode: yield* run.exitCode, results: yield* Ref.get(results) }
  })

/** The one session file the CLI wrote for `cwd`, found through skein's layout. */
export const sessionFile = (configDir: string, cwd: string) =>
  Effect.sync(() => {
    const canonical = Fs.realpathSync(cwd)
    const dir = TranscriptLayout.make(configDir).projectDir(canonical)
    const files = Fs.readdirSync(dir).filter((name) => name.endsWith(".jsonl"))
    if (files.length !== 1) throw new Error(`expected one transcript in ${dir}, found ${files.join(", ")}`)
    const id = Option.getOrThrow(TranscriptLayout.sessionIdOfFile(files[0]!))
    return { id, cwd: canonical, path: `${dir}/${files[0]!}` }
  })

const stripCacheControl = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(stripCacheControl)
    : typeof value === "object" && value !== null
    ? Object.fromEntries(
      Object.entries(value).filter(([key]) => key !== "cache_control").map(([k, v]) => [k, stripCacheControl(v)])
    )
    : value

/** Messages as compared: cache_control marks dropped (the CLI adds them per request). */
export const comparable = (messages: ReadonlyArray<Anthropic.MessageParam>): unknown => stripCacheControl(messages)

/**
 * The history a request carries before its new prompt: the CLI's own
 * `system`-role message of request settings and the prompt are left out.
 */
export const history = (request: FakeModel.RecordedRequest) => {
  const body = Option.getOrThrow(request.messagesRequest)
  const messages = body.messages.filter((message) => message.role !== "system")
  return { before: messages.slice(0, -1), prompt: messages[messages.length - 1] }
}

export const textOf = (message: Anthropic.MessageParam): string =>
  typeof message.content === "string"
    ? message.content
    : message.content.map((block) => "text" in block && typeof block.text === "string" ? block.text : block.type).join("|")

/** The text of a request's last user message. */
export const lastUserText = (request: FakeModel.RecordedRequest): string => {
  const body = Option.getOrThrow(request.messagesRequest)
  const users = body.messages.filter((message) => message.role === "user")
  const last = users[users.length - 1]
  return last === undefined ? "" : textOf(last)
}

export const withPrompt = (prompt: string): FakeModel.RequestMatch => (request) =>
  FakeModel.isConversation(request) && FakeModel.messagesText(request).includes(prompt)

/** Store, token counter and platform over the config root `root`. */
export const storeLayer = (root: string) =>
  TranscriptStore.layer.pipe(
    Layer.provideMerge(TranscriptLayout.layer(root)),
    Layer.provideMerge(NodeContext.layer),
    Layer.merge(TokenCounter.layer)
  )

/** Options for a session that runs the real CLI against `model` in `d`. */
export const sessionOptions = (model: FakeModel.FakeModel["Type"], d: ClaudeCli.OfflineDirs): Session.SessionOptions => ({
  cwd: d.cwd,
  configDir: d.configDir,
  env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
  bare: true,
  stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
})

/** Process host and platform for sessions. */
export const sessionLayer = Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)
