/**
 * The child side of FakeCli: reads the script, frames stdin, answers the
 * host's `initialize` and `interrupt` (unless told not to), and plays the steps.
 */
import { Effect, Option, Queue } from "effect"
import * as ChildProcess from "node:child_process"
import * as fs from "node:fs"
import { StringDecoder } from "node:string_decoder"
import * as FakeCli from "../FakeCli.js"
import * as Messages from "./cliMessages.js"

interface Inbound {
  readonly line: string
  readonly message: unknown
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const field = (u: unknown, key: string): unknown => (isRecord(u) ? u[key] : undefined)

const writeTo = (stream: NodeJS.WritableStream, chunk: string | Uint8Array) =>
  Effect.async<void>((resume) => {
    stream.write(chunk, () => resume(Effect.void))
  })

const out = (chunk: string | Uint8Array) => writeTo(process.stdout, chunk)
const err = (chunk: string) => writeTo(process.stderr, chunk)

/** The inner `subtype` a step's `subtype` is compared with. */
const subtypeOf = (message: unknown): unknown => {
  switch (field(message, "type")) {
    case "control_request":
      return field(field(message, "request"), "subtype")
    case "control_response":
      return field(field(message, "response"), "subtype")
    default:
      return field(message, "subtype")
  }
}

const requestIdOf = (message: unknown): unknown =>
  field(message, "request_id") ?? field(field(message, "response"), "request_id")

const matches = (step: FakeCli.Await, message: unknown): boolean =>
  field(message, "type") === step.type &&
  (step.subtype === undefined || subtypeOf(message) === step.subtype) &&
  (step.requestId === undefined || requestIdOf(message) === step.requestId)

/** Which host requests are answered as soon as they are read; `AutoAnswer` steps change it. */
interface Answering {
  initialize: boolean
  interrupt: boolean
}

/** Answers what the real CLI answers whatever it is doing. */
const autoResponse = (answering: Answering, message: unknown): unknown => {
  if (field(message, "type") !== "control_request") return undefined
  const requestId = field(message, "request_id")
  if (typeof requestId !== "string") return undefined
  switch (field(field(message, "request"), "subtype")) {
    case "initialize":
      return answering.initialize ? Messages.initializeResponse(requestId) : undefined
    case "interrupt":
      return answering.interrupt ? Messages.interruptResponse(requestId) : undefined
    default:
      return undefined
  }
}

/** Starts a process that inherits stdout/stderr and outlives this one. */
const holdStdout = (step: FakeCli.HoldStdout) =>
  Effect.sync(() => {
    const holder = ChildProcess.spawn("sleep", [String(step.millis / 1000)], {
      stdio: ["ignore", "inherit", "inherit"],
      detached: step.ownGroup
    })
    // This process may exit first; the holder must not keep it alive.
    holder.unref()
    return holder.pid
  }).pipe(Effect.flatMap((pid) => err(`fake-cli: holder pid ${pid ?? "unknown"}\n`)))

/** Frames stdin into lines; `None` marks the end of stdin. */
const readStdin = (answering: Answering) => Effect.gen(function*() {
  const inbox = yield* Queue.unbounded<Option.Option<Inbound>>()
  const decoder = new StringDecoder("utf8")
  let buffer = ""
  const onLine = (line: string) => {
    if (line.trim() === "") return
    let message: unknown
    try {
      message = JSON.parse(line)
    } catch {
      process.stderr.write(`fake-cli: ignoring malformed stdin line: ${line.slice(0, 200)}\n`)
      return
    }
    const response = autoResponse(answering, message)
    if (response !== undefined) process.stdout.write(`${JSON.stringify(response)}\n`)
    inbox.unsafeOffer(Option.some({ line, message }))
  }
  yield* Effect.sync(() => {
    process.stdin.on("data", (chunk: Buffer) => {
      buffer += decoder.write(chunk)
      let newline = buffer.indexOf("\n")
      while (newline !== -1) {
        onLine(buffer.slice(0, newline))
        buffer = buffer.slice(newline + 1)
        newline = buffer.indexOf("\n")
      }
    })
    process.stdin.on("end", () => {
      process.stderr.write("fake-cli: stdin ended\n")
      onLine(buffer + decoder.end())
      buffer = ""
      inbox.unsafeOffer(Option.none())
    })
    // A host that closes its end early must not crash the fake.
    process.stdin.on("error", () => inbox.unsafeOffer(Option.none()))
    process.stdout.on("error", () => undefined)
  })
  return inbox
})

const hugeLine = (step: FakeCli.Huge): string => {
  const head = "{\"type\":\"fake_padding\",\"padding\":\""
  const tail = "\"}"
  return step.json && step.bytes >= head.length + tail.length
    ? head + "x".repeat(step.bytes - head.length - tail.length) + tail
    : "x".repeat(step.bytes)
}

const exitNow = (code: number) =>
  Effect.sync(() => {
    process.exit(code)
  }).pipe(Effect.zipRight(Effect.never))

export const run = Effect.gen(function*() {
  const source = process.env[FakeCli.ScriptEnv]
  if (source === undefined) {
    yield* err(`fake-cli: ${FakeCli.ScriptEnv} is not set\n`)
    return yield* exitNow(2)
  }
  const json = /^\s*[[{]/.test(source) ? source : fs.readFileSync(source, "utf8")
  const decoded = yield* Effect.either(FakeCli.decodeScript(json))
  if (decoded._tag === "Left") {
    yield* err(`fake-cli: invalid script: ${decoded.left.message}\n`)
    return yield* exitNow(2)
  }

  const answering: Answering = { initialize: true, interrupt: true }
  let exitOnStdinEnd = true
  const inbox = yield* readStdin(answering)
  const backlog: Array<Inbound> = []
  let ended = false

  /** The next stdin message matching `step`, or `None` once stdin has ended. */
  const next = (step: FakeCli.Await) =>
    Effect.gen(function*() {
      const index = backlog.findIndex((inbound) => matches(step, inbound.message))
      if (index !== -1) return Option.some(backlog.splice(index, 1)[0]!)
      while (!ended) {
        const item = yield* Queue.take(inbox)
        if (Option.isNone(item)) {
          ended = true
        } else if (matches(step, item.value.message)) {
          return item
        } else {
          backlog.push(item.value)
        }
      }
      return Option.none<Inbound>()
    })

  const play = (step: FakeCli.Step): Effect.Effect<void> => {
    switch (step._tag) {
      case "Raw":
        return out(step.encoding === "base64" ? Buffer.from(step.data, "base64") : step.data)
      case "Emit":
        return out(`${JSON.stringify(step.message)}\n`)
      case "Huge":
        return out(`${hugeLine(step)}\n`)
      case "Await":
        return Effect.gen(function*() {
          const found = yield* next(step)
          if (Option.isNone(found)) {
            yield* err(`fake-cli: stdin ended while waiting for ${step.type}\n`)
            return yield* exitOnStdinEnd ? exitNow(0) : Effect.never
          }
          if (step.echo === true) yield* out(`${found.value.line}\n`)
          if (step.record !== undefined) {
            const path = step.record
            yield* Effect.sync(() => fs.appendFileSync(path, `${found.value.line}\n`))
          }
        })
      case "AwaitEnd":
        return Effect.gen(function*() {
          while (!ended) {
            const item = yield* Queue.take(inbox)
            if (Option.isNone(item)) ended = true
            else backlog.push(item.value)
          }
        })
      case "Sleep":
        return Effect.sleep(step.millis)
      case "Exit":
        return exitNow(step.code)
      case "Kill":
        return Effect.sync(() => process.kill(process.pid, step.signal)).pipe(
          // Let the signal land before the next step runs.
          Effect.zipRight(Effect.sleep(10))
        )
      case "Hang":
        return Effect.never
      case "IgnoreSignal":
        return Effect.sync(() => {
          process.on(step.signal, () => {
            process.stderr.write(`fake-cli: ignored ${step.signal}\n`)
          })
        })
      case "Stderr":
        return err(step.text)
      case "AutoAnswer":
        return Effect.sync(() => {
          answering.initialize = step.initialize
          answering.interrupt = step.interrupt
        })
      case "IgnoreStdinEnd":
        return Effect.sync(() => {
          exitOnStdinEnd = false
        })
      case "HoldStdout":
        return holdStdout(step)
    }
  }

  yield* Effect.forEach(decoded.right, play, { discard: true })
  return yield* exitNow(0)
})
