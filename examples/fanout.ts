/**
 * Fan-out: one session forks three workers on different questions and
 * gathers their answers.
 *
 *   npx tsx examples/fanout.ts
 *
 * The parent reads a short project brief; each worker is a second Claude Code
 * process forked from it (`--resume <parent> --fork-session`), so every
 * worker's first request starts with the brief and the prompt cache is
 * shared. The workers run at once as `local_agent` tasks of a TaskManager,
 * each recording to its own sidechain under the parent; the parent's own
 * transcript gains nothing from them. Their answers come back as the tasks'
 * results, and the parent gets them in one last turn.
 *
 * Offline and hermetic: the real CLI talks only to an embedded FakeModel on
 * 127.0.0.1, with a private config folder, working directory and TMPDIR.
 * Closing the scope stops every process and removes the folders.
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { ProcessHost, TaskManager } from "@skein/kernel"
import { SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import { Session, Worker } from "@skein/session"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Console, Effect, Layer, Option } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

const brief =
  "Project brief: skein hosts Claude Code processes as supervised actors. A session is one CLI process; " +
  "a worker is a fork of a session that shares its prompt cache but none of its mutable state."

const questions = [
  { label: "scaling", question: "How many workers may one session run at once?", answer: "Four at a time by default; further forks wait in a queue for a free slot." },
  { label: "failure", question: "What happens to the workers if the session is interrupted?", answer: "They are killed with it: their tasks end `killed` and their processes exit." },
  { label: "records", question: "Where does a worker's conversation go?", answer: "To its own sidechain file under the session's folder, never to the session's main transcript." }
] as const

/** The text of the last user message of a request: how replies are routed to the right process. */
const lastUserText = (request: FakeModel.RecordedRequest): string =>
  Option.match(request.messagesRequest, {
    onNone: () => "",
    onSome: (body) => {
      const last = body.messages.filter((m) => m.role === "user").at(-1)
      if (last === undefined) return ""
      return typeof last.content === "string"
        ? last.content
        : last.content.flatMap((block) => block.type === "text" && "text" in block ? [block.text] : []).join("\n")
    }
  })

const asking = (text: string): FakeModel.RequestMatch => (request) =>
  FakeModel.isConversation(request) && lastUserText(request).includes(text)

const script: ReadonlyArray<FakeModel.Reply> = [
  FakeModel.matching(FakeModel.text("Got it: I have the brief."), asking("Project brief")),
  ...questions.map(({ answer, question }) => FakeModel.withDelay(FakeModel.matching(FakeModel.text(answer), asking(question)), "20 millis")),
  FakeModel.matching(
    FakeModel.text("All three answers are in: workers are bounded per session, die with it, and keep their own records."),
    asking("The workers answered")
  )
]

const tempDirs = ClaudeCli.offlineDirs("skein-fanout-")

const main = Effect.gen(function*() {
  const model = yield* FakeModel.make({ replies: script })
  const d = yield* tempDirs
  const tasks = yield* TaskManager.make({ root: Path.join(d.root, "runtime") })
  const stores = yield* Layer.build(
    Layer.mergeAll(TranscriptStore.layer, SessionIndex.layer).pipe(
      Layer.provide(TranscriptLayout.layer(d.configDir)),
      Layer.provide(NodeContext.layer)
    )
  )
  const launch: Session.SessionOptions = {
    cwd: d.cwd,
    configDir: d.configDir,
    env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
    bare: true,
    stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
  }

  const parent = yield* Session.start(launch)
  const intro = yield* Effect.flatMap(parent.send(brief), (turn) => turn.result)
  const parentId = yield* parent.sessionId
  yield* Console.log(`parent ${parentId}: ${intro.text}`)

  const workers = yield* Worker.pool(parent, { launch }).pipe(
    Effect.provide(stores),
    Effect.provideService(TaskManager.TaskManager, tasks)
  )
  const forked = yield* Effect.forEach(questions, ({ label, question }) => Worker.fork(workers, { label, prompt: question }))
  yield* Console.log(`forked ${forked.length} workers: ${forked.map((w) => `${w.taskId} (${w.label})`).join(", ")}`)

  const results = yield* Effect.forEach(forked, (worker) => worker.result, { concurrency: "unbounded" })
  for (const [i, result] of results.entries()) {
    yield* Console.log(`\n[${result.label}] ${questions[i]?.question}\n  ${result.text}`)
    yield* Console.log(`  task ${result.taskId}, session ${result.sessionId}, exit ${result.exit.code}, $${result.costUsd.toFixed(4)}`)
    yield* Console.log(`  sidechain ${Path.relative(d.configDir, result.sidechainPath)}`)
  }

  // Every worker's first request began with the parent's brief: the shared cache prefix.
  const requests = (yield* model.requests).filter(FakeModel.isConversation)
  const shared = questions.every(({ question }) =>
    requests.some((request) =>
      asking(question)(request) &&
      Option.match(request.messagesRequest, { onNone: () => false, onSome: (body) => JSON.stringify(body.messages[0]).includes("Project brief") })
    )
  )
  yield* Console.log(`\nevery worker's first request starts with the parent's brief: ${shared}`)

  const gathered = results.map((r) => `- ${r.label}: ${r.text ?? "(no answer)"}`).join("\n")
  const summary = yield* Effect.flatMap(parent.send(`The workers answered:\n${gathered}\nSum it up.`), (turn) => turn.result)
  yield* Console.log(`parent: ${summary.text}`)

  const costs = yield* workers.costs
  yield* Console.log(
    `cost: parent $${costs.parentUsd.toFixed(4)} + workers $${costs.workersUsd.toFixed(4)} = $${costs.totalUsd.toFixed(4)}`
  )
  const parentTranscript = Fs.readFileSync(Session.transcriptPath(d.configDir, d.cwd, parentId), "utf8")
  const leaked = results.some((r) => parentTranscript.includes(r.sessionId))
  yield* Console.log(`the parent's transcript holds no worker entries: ${!leaked}`)
  if (!shared || leaked || results.some((r) => r.text === undefined)) {
    return yield* Effect.dieMessage("fan-out check failed")
  }
})

main.pipe(
  Effect.scoped,
  Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)),
  NodeRuntime.runMain
)
