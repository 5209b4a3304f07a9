/**
 * The sessions a server serves, keyed by their `ses_` id.
 *
 * This is the seam between the HTTP edge and where sessions run. The
 * in-process default keeps each live session as a fiber of its own (a
 * `FiberMap` entry whose scope owns the CLI process), starts it on demand,
 * and lists the sessions that exist only as transcripts too: prompting one
 * resumes it with `--resume`. A later backing (cluster entities) implements
 * the same service.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { ProcessHost } from "@skein/kernel"
import type { Anthropic } from "@skein/protocol"
import { Canonical } from "@skein/protocol"
import { Session } from "@skein/session"
import { SessionIndex, TranscriptLayout } from "@skein/store"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as EventTranslator from "./EventTranslator.js"
import * as History from "./History.js"
import * as Ids from "./Ids.js"
import { type Known, make as makeKnownSessions } from "./internal/knownSessions.js"
import * as LiveSession from "./internal/liveSession.js"
import { PermissionBroker } from "./PermissionBroker.js"
import { type RegistryError, SessionFailed } from "./ServeError.js"
import { ServerEvents } from "./ServerEvents.js"

/** A session as opencode lists it. */
export interface SessionInfo extends Canonical.SessionInfo {
  readonly slug: string
  readonly projectID: string
  /** skein: the CLI's own session UUID. */
  readonly cliSessionId: string
}

export interface PromptOptions {
  /** The client's id for the prompt; echoed back for correlation. */
  readonly messageID?: string | undefined
}

export class SessionRegistry extends Context.Tag("@skein/serve/SessionRegistry")<SessionRegistry, {
  readonly create: (input: { readonly directory: string; readonly title?: string | undefined }) => Effect.Effect<SessionInfo, RegistryError>
  /** Live sessions and transcripts, most recently updated first; one directory or all. */
  readonly list: (directory?: string) => Effect.Effect<ReadonlyArray<SessionInfo>, RegistryError>
  readonly get: (sessionID: string) => Effect.Effect<SessionInfo, RegistryError>
  readonly messages: (sessionID: string) => Effect.Effect<ReadonlyArray<History.WithParts>, RegistryError>
  /** Runs one turn to its authoritative end; the turn's last assistant message. */
  readonly prompt: (
    sessionID: string,
    content: string | ReadonlyArray<Anthropic.ContentBlock>,
    options?: PromptOptions
  ) => Effect.Effect<History.WithParts, RegistryError>
  /** Queues the prompt behind a busy session (waking a stopped one) and returns at once with the message id. */
  readonly promptAsync: (
    sessionID: string,
    content: string | ReadonlyArray<Anthropic.ContentBlock>,
    options?: PromptOptions
  ) => Effect.Effect<string, RegistryError>
  /** Interrupts a live turn; `true` also when there is none. */
  readonly abort: (sessionID: string) => Effect.Effect<boolean, RegistryError>
  readonly status: Effect.Effect<Readonly<Record<string, Canonical.SessionStatus>>>
  /** Stops a live session (its transcript stays). */
  readonly stop: (sessionID: string) => Effect.Effect<void>
}>() {}

export interface Options {
  /** The CLIs' config root (`CLAUDE_CONFIG_DIR`): transcripts are listed and resumed from here. */
  readonly configDir: string
  /** Options every CLI gets (env, executable, bare, …); `cwd`, resume and the session id are the registry's. */
  readonly session?: Partial<Session.SessionOptions> | undefined
  /** Dual-write the legacy flat events. Default true. */
  readonly legacy?: boolean | undefined
  /** How long a turn's end may take to reach the event log after the CLI reports it. Default 10 s. */
  readonly settle?: Duration.DurationInput | undefined
}

const projectIdOf = (directory: string) => `prj_${Ids.hash(directory, 24)}`

const infoOf = (sessionID: string, known: Known): SessionInfo => ({
  id: sessionID,
  slug: sessionID.slice(4),
  projectID: projectIdOf(known.directory),
  directory: known.directory,
  title: known.title,
  version: "skein",
  cliSessionId: known.cliSessionId,
  time: { created: known.created, updated: known.updated }
})

const canonicalInfo = (info: SessionInfo): Canonical.SessionInfo => ({
  id: info.id,
  title: info.title,
  directory: info.directory,
  projectID: info.projectID,
  ...(info.version === undefined ? {} : { version: info.version }),
  time: info.time
})

const textOf = (content: string | ReadonlyArray<Anthropic.ContentBlock>) =>
  typeof content === "string" ? content : content.flatMap((b) => ("text" in b && typeof b.text === "string" ? [b.text] : [])).join("\n")

/** The messages of the turn that ends after `before` turns ended, or none within `settle`. */
const untilEnded = (session: LiveSession.LiveSession, before: number, settle: Duration.DurationInput) =>
  session.ended.changes.pipe(
    Stream.filter((e) => e.count > before),
    Stream.runHead,
    Effect.map(Option.map((e) => e.messages)),
    Effect.timeout(settle),
    Effect.orElseSucceed(() => Option.none())
  )

const lastAssistant = <M extends { readonly info: { readonly role: string } }>(messages: ReadonlyArray<M>) =>
  Option.fromNullable(messages.findLast((m) => m.info.role === "assistant"))

/** Where translation starts: the history of a transcript being resumed, else nothing. */
const initialState = (path: string, k: Known, resume: boolean, legacy: boolean) => {
  const fresh = EventTranslator.initial({ cliSessionId: k.cliSessionId, cwd: k.directory, legacy })
  return resume
    ? History.fromTranscript(path, { cliSessionId: k.cliSessionId, cwd: k.directory }).pipe(
      Effect.map((h) => ({ ...h.state, options: { ...h.state.options, legacy } })),
      Effect.orElseSucceed(() => fresh)
    )
    : Effect.succeed(fresh)
}

/** A served session's CLI options: resumed from its transcript, or started under the id the server chose. */
const sessionOptions = (options: Options, k: Known, resume: boolean): Session.SessionOptions => {
  const base = options.session ?? {}
  return {
    ...base,
    cwd: k.directory,
    configDir: base.configDir ?? options.configDir,
    includePartialMessages: base.includePartialMessages ?? true,
    ...(resume
      ? { resume: k.cliSessionId }
      : { extraArgs: [...(base.extraArgs ?? []), "--session-id", k.cliSessionId] })
  }
}

export const make = Effect.fn("SessionRegistry.make")(function*(options: Options) {
  const fs = yield* FileSystem.FileSystem
  const host = yield* ProcessHost.ProcessHost
  const events = yield* ServerEvents
  const broker = yield* PermissionBroker
  const index = yield* SessionIndex.make.pipe(Effect.provide(TranscriptLayout.layer(options.configDir)))
  const fibers = yield* FiberMap.make<string>()
  const catalog = makeKnownSessions(index, options.configDir)
  const lookup = catalog.lookup
  const lives = new Map<string, Deferred.Deferred<LiveSession.LiveSession, SessionFailed>>()
  const lock = yield* Effect.makeSemaphore(1)
  const settle = options.settle ?? Duration.seconds(10)

  const transcriptOf = (k: Known) => Session.transcriptPath(options.configDir, k.directory, k.cliSessionId)

  /** The live session, started (or resumed from its transcript) when it is not running. */
  const live = (sessionID: string) =>
    lock.withPermits(1)(Effect.gen(function*() {
      const running = lives.get(sessionID)
      if (running !== undefined) return running
      const k = yield* lookup(sessionID)
      const ready = yield* Deferred.make<LiveSession.LiveSession, SessionFailed>()
      lives.set(sessionID, ready)
      const resume = yield* Effect.orElseSucceed(fs.exists(transcriptOf(k)), () => false)
      const initial = yield* initialState(transcriptOf(k), k, resume, options.legacy ?? true)
      const run = LiveSession.start({
        directory: k.directory,
        cliSessionId: k.cliSessionId,
        initial,
        events,
        broker,
        session: sessionOptions(options, k, resume)
      }).pipe(
        Effect.tap((session) => Deferred.succeed(ready, session)),
        Effect.flatMap((session) => session.session.exit),
        Effect.catchAll((error) => Deferred.fail(ready, new SessionFailed({ sessionID, reason: String(error) }))),
        Effect.ensuring(Effect.sync(() => lives.delete(sessionID))),
        Effect.scoped,
        Effect.provideService(ProcessHost.ProcessHost, host),
        Effect.provideService(FileSystem.FileSystem, fs)
      )
      yield* FiberMap.run(fibers, sessionID, run)
      return ready
    }).pipe(Effect.provideService(FileSystem.FileSystem, fs))).pipe(Effect.flatMap(Deferred.await))

  const send = (sessionID: string, content: string | ReadonlyArray<Anthropic.ContentBlock>) =>
    Effect.gen(function*() {
      const session = yield* live(sessionID)
      const k = yield* lookup(sessionID)
      k.updated = Date.now()
      const before = (yield* SubscriptionRef.get(session.ended)).count
      const turn = yield* session.session.send(content).pipe(
        Effect.mapError((e) => new SessionFailed({ sessionID, reason: String(e) }))
      )
      return { session, turn, before }
    })

  return SessionRegistry.of({
    create: Effect.fn("SessionRegistry.create")(function*(input) {
      const cliSessionId = crypto.randomUUID()
      const sessionID = Ids.session(cliSessionId)
      const now = Date.now()
      const k: Known = { cliSessionId, directory: input.directory, title: input.title ?? `New session - ${new Date(now).toISOString()}`, created: now, updated: now }
      catalog.add(sessionID, k)
      const info = infoOf(sessionID, k)
      yield* Effect.orDie(events.publish(k.directory, [Canonical.event("session.created", { info: canonicalInfo(info) })]))
      return info
    }),
    list: (directory) =>
      Effect.map(catalog.list(directory), (all) =>
        all.map(([id, k]) => infoOf(id, k)).sort((a, b) => b.time.updated - a.time.updated)),
    get: (sessionID) => Effect.map(lookup(sessionID), (k) => infoOf(sessionID, k)),
    messages: (sessionID) =>
      Effect.gen(function*() {
        const k = yield* lookup(sessionID)
        const path = transcriptOf(k)
        if (!(yield* Effect.orElseSucceed(fs.exists(path), () => false))) return []
        const loaded = yield* History.fromTranscript(path, { cliSessionId: k.cliSessionId, cwd: k.directory }).pipe(
          Effect.mapError((e) => new SessionFailed({ sessionID, reason: `reading the transcript: ${String(e)}` }))
        )
        return loaded.messages
      }).pipe(Effect.provideService(FileSystem.FileSystem, fs)),
    prompt: (sessionID, content) =>
      Effect.gen(function*() {
        const { before, session, turn } = yield* send(sessionID, content)
        yield* turn.result.pipe(Effect.mapError((e) => new SessionFailed({ sessionID, reason: String(e) })))
        const messages = yield* untilEnded(session, before, settle)
        const last = Option.flatMap(messages, lastAssistant)
        if (Option.isNone(last)) {
          return yield* new SessionFailed({ sessionID, reason: `the turn produced no assistant message (prompt: ${textOf(content).slice(0, 40)})` })
        }
        return last.value
      }),
    promptAsync: (sessionID, content, promptOptions) =>
      Effect.gen(function*() {
        // Queued in the session's turn order; its end reaches clients as events.
        yield* send(sessionID, content)
        return promptOptions?.messageID ?? Ids.make("msg", Ids.sortKey(Date.now(), Ids.PROMPT_ORDINAL), crypto.randomUUID())
      }),
    abort: (sessionID) =>
      Effect.gen(function*() {
        yield* lookup(sessionID)
        const running = lives.get(sessionID)
        if (running === undefined) return true
        const session = yield* Deferred.await(running).pipe(Effect.option)
        if (Option.isSome(session)) yield* Effect.ignore(session.value.session.interrupt)
        return true
      }),
    status: Effect.gen(function*() {
      const out: Record<string, Canonical.SessionStatus> = {}
      for (const [id, ready] of lives) {
        const session = yield* Deferred.poll(ready)
        if (Option.isNone(session)) continue
        const done = yield* Effect.option(session.value)
        if (Option.isSome(done) && (yield* Ref.get(done.value.busy))) out[id] = { type: "busy" }
      }
      return out
    }),
    stop: (sessionID) => FiberMap.remove(fibers, sessionID)
  })
})

export const layer = (options: Options) => Layer.scoped(SessionRegistry, make(options))
