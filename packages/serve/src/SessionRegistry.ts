/**
 * The sessions a server serves, keyed by their `ses_` id.
 *
 * This is the seam between the HTTP edge and where sessions run. The
 * in-process default keeps each live session as a fiber of its own (a
 * `FiberMap` entry whose scope owns the CLI process), starts it on demand,
 * stops it when it has been idle for `idleTimeout` (its transcript stays;
 * the next prompt resumes it with `--resume`), and lists the sessions that
 * exist only as transcripts too. A later backing (cluster entities)
 * implements the same service.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { ProcessHost } from "@skein/kernel"
import type { Anthropic } from "@skein/protocol"
import { Canonical } from "@skein/protocol"
import { Permissions, Session } from "@skein/session"
import { Branch, ResumeLoader, SessionIndex, TranscriptLayout } from "@skein/store"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Crypto from "node:crypto"
import * as Path from "node:path"
import { EventTranslator, History, Ids, Todos } from "@skein/canonical"
import type { SessionCatalog } from "@skein/sql"
import * as Forks from "./internal/forks.js"
import { fromEntry, type Known, type KnownSessions, make as makeKnownSessions } from "./internal/knownSessions.js"
import * as LiveSession from "./internal/liveSession.js"
import * as LiveSessions from "./internal/liveSessions.js"
import * as Questions from "./internal/questions.js"
import * as SessionStore from "./internal/sessionStore.js"
import { PermissionBroker } from "./PermissionBroker.js"
import { insideRoots } from "./internal/http.js"
import { MessageNotFound, type QuestionNotFound, type RegistryError, SessionFailed, SessionNotFound } from "./ServeError.js"
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
  /** The model for this turn on: a name the CLI takes for `--model`, `null` for its default; unset leaves it. */
  readonly model?: string | null | undefined
}

type Content = string | ReadonlyArray<Anthropic.ContentBlock>

export class SessionRegistry extends Context.Tag("@skein/serve/SessionRegistry")<SessionRegistry, {
  readonly create: (input: { readonly directory: string; readonly title?: string | undefined }) => Effect.Effect<SessionInfo, RegistryError>
  /** Live sessions and transcripts, most recently updated first; one directory or all. */
  readonly list: (directory?: string) => Effect.Effect<ReadonlyArray<SessionInfo>, RegistryError>
  readonly get: (sessionID: string) => Effect.Effect<SessionInfo, RegistryError>
  /** Sets the title; it is kept as skein's mark of the session, so it outlives the server. */
  readonly update: (sessionID: string, patch: { readonly title?: string | undefined }) => Effect.Effect<SessionInfo, RegistryError>
  /** Stops the live session and archives its transcript out of the listing. */
  readonly remove: (sessionID: string) => Effect.Effect<void, RegistryError>
  readonly children: (sessionID: string) => Effect.Effect<ReadonlyArray<SessionInfo>, RegistryError>
  readonly messages: (sessionID: string) => Effect.Effect<ReadonlyArray<History.WithParts>, RegistryError>
  readonly message: (sessionID: string, messageID: string) => Effect.Effect<History.WithParts, RegistryError | MessageNotFound>
  readonly todo: (sessionID: string) => Effect.Effect<ReadonlyArray<Todos.Todo>, RegistryError>
  /** A new session over a branch of the transcript before `messageID` (all of it without one). */
  readonly fork: (sessionID: string, input: { readonly messageID?: string | undefined }) => Effect.Effect<SessionInfo, RegistryError | MessageNotFound>
  /** Compacts the session: the CLI's own `/compact`, as a turn. */
  readonly summarize: (sessionID: string) => Effect.Effect<void, RegistryError>
  /** Runs one turn to its authoritative end; the turn's last assistant message. */
  readonly prompt: (sessionID: string, content: Content, options?: PromptOptions) => Effect.Effect<History.WithParts, RegistryError>
  /** Queues the prompt behind a busy session (waking a stopped one) and returns once it is queued, with the message id. */
  readonly promptAsync: (sessionID: string, content: Content, options?: PromptOptions) => Effect.Effect<string, RegistryError>
  /** Interrupts a live turn; `true` also when there is none. */
  readonly abort: (sessionID: string) => Effect.Effect<boolean, RegistryError>
  readonly status: Effect.Effect<Readonly<Record<string, Canonical.SessionStatus>>>
  /** The sessions whose CLI runs now. */
  readonly running: Effect.Effect<ReadonlyArray<string>>
  /** Stops a live session (its transcript stays). */
  readonly stop: (sessionID: string) => Effect.Effect<void>
  /** Pending `AskUserQuestion` questions. */
  readonly questions: (directory?: string) => Effect.Effect<ReadonlyArray<Canonical.QuestionRequest>>
  readonly answer: (requestID: string, answer: Questions.Answer) => Effect.Effect<void, QuestionNotFound>
}>() {}

export interface Options {
  /** The CLIs' config root (`CLAUDE_CONFIG_DIR`): transcripts are listed and resumed from here. */
  readonly configDir: string
  /**
   * Physical folders the served sessions must be in: a session elsewhere
   * (another project's transcript under the same config root) is not
   * listed, and its id is not found. Default: no confinement.
   */
  readonly roots?: ReadonlyArray<string> | undefined
  /** Options every CLI gets (env, executable, bare, …); `cwd`, resume and the session id are the registry's. */
  readonly session?: Partial<Session.SessionOptions> | undefined
  /** Dual-write the legacy flat events. Default true. */
  readonly legacy?: boolean | undefined
  /** How long a turn's end may take to reach the event log after the CLI reports it. Default 10 s. */
  readonly settle?: Duration.DurationInput | undefined
  /** A live session with no turn running or queued for this long is stopped. Default 10 minutes; `Duration.infinity` keeps it. */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /** Where deleted sessions' transcripts go. Default `<configDir>/skein/serve/archive`. */
  readonly archiveDir?: string | undefined
  /** A question no client answers is withdrawn after this long. Default 5 minutes. */
  readonly questionTimeout?: Duration.DurationInput | undefined
  /**
   * A CLI that says nothing (not even keep_alive) for this long while a turn
   * waits on it is stopped, and the turn fails with a `session.error`.
   * Default `defaultSilenceTimeout`; `session.silenceTimeout` wins.
   */
  readonly silenceTimeout?: Duration.DurationInput | undefined
  /**
   * Sessions known elsewhere (a catalog several servers share): a lookup
   * that misses here asks it, and a session it knows is served from then on.
   * Cluster runners use it to host a session created through another one.
   */
  readonly known?: ((sessionID: string) => Effect.Effect<Option.Option<KnownSession>>) | undefined
  /**
   * This host's name in the store's ask ledger, whose asks left open by an
   * earlier run are closed at start. Default the machine's hostname; cluster
   * runners on one machine each give their own (the runner's address).
   */
  readonly askHost?: string | undefined
}

/** A session as a shared catalog knows it (see `Options.known`). */
export interface KnownSession {
  readonly cliSessionId: string
  readonly directory: string
  readonly title: string
  readonly created: number
  readonly updated: number
  readonly parentID?: string | undefined
}

/**
 * A shared catalog's row as the registry adopts its session (`Options.known`).
 *
 * @since 0.1.0
 */
export const knownOfEntry: (entry: SessionCatalog.Entry) => KnownSession = fromEntry

/**
 * Longer than any one tool call the CLI lets run (a Bash command's own cap
 * is 10 minutes), so a turn that works is never taken for a wedged one.
 */
export const defaultSilenceTimeout = Duration.minutes(15)

const projectIdOf = (directory: string) => `prj_${Ids.hash(directory, 24)}`

const infoOf = (sessionID: string, known: Known): SessionInfo => ({
  id: sessionID,
  slug: sessionID.slice(4),
  projectID: projectIdOf(known.directory),
  directory: known.directory,
  title: known.title,
  version: "skein",
  cliSessionId: known.cliSessionId,
  ...(known.parentID === undefined ? {} : { parentID: known.parentID }),
  time: { created: known.created, updated: known.updated }
})

const canonicalInfo = (info: SessionInfo): Canonical.SessionInfo => ({
  id: info.id,
  title: info.title,
  directory: info.directory,
  projectID: info.projectID,
  ...(info.parentID === undefined ? {} : { parentID: info.parentID }),
  ...(info.version === undefined ? {} : { version: info.version }),
  time: info.time
})

const textOf = (content: Content) =>
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

/** What the registry knows and the CLI does not: the translator's `session.updated` carries it as the registry's own does. */
const hostInfo = (k: Known): EventTranslator.HostInfo => ({
  title: k.title,
  created: k.created,
  projectID: projectIdOf(k.directory),
  version: "skein",
  ...(k.parentID === undefined ? {} : { parentID: k.parentID })
})

/** Where translation starts: the history of a transcript being resumed, else nothing. */
const initialState = (path: string, k: Known, resume: boolean, legacy: boolean) => {
  const host = hostInfo(k)
  const fresh = EventTranslator.initial({ cliSessionId: k.cliSessionId, cwd: k.directory, legacy, host })
  return resume
    ? History.fromTranscript(path, { cliSessionId: k.cliSessionId, cwd: k.directory }).pipe(
      Effect.map((h) => ({ ...h.state, options: { ...h.state.options, legacy, host } })),
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
    silenceTimeout: base.silenceTimeout ?? options.silenceTimeout ?? defaultSilenceTimeout,
    ...(resume
      ? { resume: k.cliSessionId }
      : { extraArgs: [...(base.extraArgs ?? []), "--session-id", k.cliSessionId] })
  }
}

/** What the registry's operations share. */
interface Core {
  readonly options: Options
  readonly fs: FileSystem.FileSystem
  readonly events: ServerEvents["Type"]
  readonly index: SessionIndex.SessionIndex["Type"]
  readonly catalog: KnownSessions
  readonly sessions: LiveSessions.LiveSessions
  readonly transcriptOf: (k: Known) => string
  /** With a session store: its mirror, catalog and ask ledger. */
  readonly store: SessionStore.SessionStore | undefined
  /** Brings the session's transcript from the store onto this disk (none is mirrored: nothing to do). */
  readonly restore: (sessionID: string, k: Known) => Effect.Effect<void, SessionFailed>
  /** Copies what skein wrote into a session's files (a branch) to the store. */
  readonly mirror: (sessionID: string, k: Known) => Effect.Effect<void, SessionFailed>
  /** The live session, started (or resumed) when it is not running; counts as a prompt for the idle timer. */
  readonly live: (sessionID: string) => Effect.Effect<LiveSession.LiveSession, RegistryError>
  readonly stopLive: (sessionID: string) => Effect.Effect<void>
  readonly settle: Duration.DurationInput
}

const failed = (sessionID: string, what: string) => (e: unknown) => new SessionFailed({ sessionID, reason: `${what}: ${String(e)}` })

/** A log that refuses the write is the operation's failure, answered as such (not a defect). */
const publishInfo = (core: Core, type: "session.created" | "session.updated" | "session.deleted", info: SessionInfo) =>
  core.events.publish(info.directory, [Canonical.event(type, { info: canonicalInfo(info) })]).pipe(
    Effect.asVoid,
    Effect.mapError((e) => new SessionFailed({ sessionID: info.id, reason: `the event log refused ${type}: ${e.message}` }))
  )

/** The history, or none before the CLI wrote its transcript. */
const loadHistory = (core: Core, sessionID: string, k: Known) =>
  Effect.gen(function*() {
    // A running session's file here is the newest; another is brought from the store.
    if (Option.isNone(yield* core.sessions.peek(sessionID))) yield* core.restore(sessionID, k)
    const path = core.transcriptOf(k)
    if (!(yield* Effect.orElseSucceed(core.fs.exists(path), () => false))) return Option.none<History.Loaded>()
    return Option.some(
      yield* History.fromTranscript(path, { cliSessionId: k.cliSessionId, cwd: k.directory }).pipe(
        Effect.mapError(failed(sessionID, "reading the transcript"))
      )
    )
  }).pipe(Effect.provideService(FileSystem.FileSystem, core.fs))

/** What a running session has shown live, if it runs; none while it starts. */
const shownLive = (core: Core, sessionID: string) =>
  Effect.flatMap(core.sessions.peek(sessionID), Option.match({ onNone: () => Effect.succeed([]), onSome: (live) => live.shown }))

/** The transcript's messages, with what a running session has shown and not yet written (see `History.withShown`). */
const messagesOf = (core: Core, sessionID: string) =>
  Effect.flatMap(core.catalog.lookup(sessionID), (k) =>
    Effect.zipWith(
      Effect.map(loadHistory(core, sessionID, k), Option.match({ onNone: () => [], onSome: (h) => h.messages })),
      shownLive(core, sessionID),
      History.withShown
    ))

/** skein's mark of a session: the title set here, the parent of a fork. */
const mark = (core: Core, sessionID: string, k: Known) =>
  Effect.gen(function*() {
    const parent = k.parentID === undefined ? undefined : yield* Effect.option(core.catalog.lookup(k.parentID))
    yield* core.index.mark({
      sessionId: k.cliSessionId,
      kind: "session",
      label: k.title,
      ...(parent === undefined || Option.isNone(parent) ? {} : { parentSessionId: parent.value.cliSessionId })
    }).pipe(Effect.mapError(failed(sessionID, "recording the session")))
  })

/** A running session's translator takes the new title; a stopped one reads it from the catalog when it starts. */
const retitleLive = (core: Core, sessionID: string, title: string) =>
  Effect.flatMap(
    core.sessions.peek(sessionID),
    Option.match({ onNone: () => Effect.void, onSome: (live) => live.inject({ _tag: "Retitled", title }) })
  )

const update = (core: Core) =>
  Effect.fn("SessionRegistry.update")(function*(sessionID: string, patch: { readonly title?: string | undefined }) {
    const k = yield* core.catalog.lookup(sessionID)
    if (patch.title !== undefined) {
      k.title = patch.title
      yield* retitleLive(core, sessionID, patch.title)
    }
    k.updated = Date.now()
    yield* core.catalog.save(sessionID, k)
    yield* mark(core, sessionID, k)
    const info = infoOf(sessionID, k)
    yield* publishInfo(core, "session.updated", info)
    return info
  })

const remove = (core: Core) =>
  Effect.fn("SessionRegistry.remove")(function*(sessionID: string) {
    const k = yield* core.catalog.lookup(sessionID)
    yield* core.stopLive(sessionID)
    yield* core.catalog.remove(sessionID)
    // The transcript is archived, not deleted: it is Claude Code's own session file (the CLI's
    // `--resume` reads it too), so it moves out of the listing and can be moved back.
    const path = core.transcriptOf(k)
    if (yield* Effect.orElseSucceed(core.fs.exists(path), () => false)) {
      const archive = core.options.archiveDir ?? Path.join(core.options.configDir, "skein", "serve", "archive")
      yield* core.fs.makeDirectory(archive, { recursive: true }).pipe(
        Effect.zipRight(core.fs.rename(path, Path.join(archive, Path.basename(path)))),
        Effect.mapError(failed(sessionID, "archiving the transcript"))
      )
    }
    k.updated = Date.now()
    yield* publishInfo(core, "session.deleted", infoOf(sessionID, k))
  })

const fork = (core: Core) =>
  Effect.fn("SessionRegistry.fork")(function*(sessionID: string, input: { readonly messageID?: string | undefined }) {
    const k = yield* core.catalog.lookup(sessionID)
    if (Option.isNone(yield* core.sessions.peek(sessionID))) yield* core.restore(sessionID, k)
    const path = core.transcriptOf(k)
    const exists = yield* Effect.orElseSucceed(core.fs.exists(path), () => false)
    const entries = exists
      ? (yield* ResumeLoader.load(path).pipe(Effect.mapError(failed(sessionID, "reading the transcript")))).entries
      : []
    const point = Forks.branchPoint(entries, { cliSessionId: k.cliSessionId, cwd: k.directory, legacy: false }, input.messageID)
    if (Either.isLeft(point)) return yield* new MessageNotFound({ sessionID, messageID: input.messageID ?? "" })
    const cliSessionId = crypto.randomUUID()
    if (point.right !== undefined) {
      yield* Branch.branch(path, { at: point.right, sessionId: cliSessionId }).pipe(Effect.mapError(failed(sessionID, "writing the branch")))
    }
    const now = Date.now()
    const known: Known = { cliSessionId, directory: k.directory, title: `${k.title} (fork)`, created: now, updated: now, parentID: sessionID }
    const forkID = Ids.session(cliSessionId)
    // The branch is skein's own write: it reaches the store as the CLI's writes do.
    if (point.right !== undefined) yield* core.mirror(forkID, known)
    yield* core.catalog.add(forkID, known)
    yield* mark(core, forkID, known)
    const info = infoOf(forkID, known)
    yield* publishInfo(core, "session.created", info)
    return info
  })

/** The title opencode gives a session no one has named; it names it after the first prompt. */
const unnamed = /^New session - \d{4}-\d{2}-\d{2}T/

/** A title from a prompt: its first line, at most 50 characters. A command (`/compact`) names nothing. */
export const titleFrom = (content: Content): string | undefined => {
  const line = textOf(content).trim().split("\n")[0]!.trim()
  if (line === "" || line.startsWith("/")) return undefined
  return line.length > 50 ? `${line.slice(0, 49).trimEnd()}…` : line
}

/** Queues the content as a turn of the live session (starting it); the turns ended before it. */
const send = (core: Core, sessionID: string, content: Content, options?: PromptOptions) =>
  Effect.gen(function*() {
    const session = yield* core.live(sessionID)
    const model = options?.model
    if (model !== undefined && (yield* Ref.get(session.model)) !== model) {
      // Queued turns run in order, and the CLI reads stdin in order: the switch applies from this prompt on.
      yield* session.session.setModel(model).pipe(Effect.mapError(failed(sessionID, "switching the model")))
      yield* Ref.set(session.model, model)
    }
    const k = yield* core.catalog.lookup(sessionID)
    // Without a model call for it, as opencode makes one: the prompt's first line.
    const title = unnamed.test(k.title) ? titleFrom(content) : undefined
    if (title !== undefined) yield* update(core)(sessionID, { title })
    k.updated = Date.now()
    const before = (yield* SubscriptionRef.get(session.ended)).count
    // Named here, kept by the CLI in its transcript: the prompt shows live under the id the history gives it.
    const uuid = Crypto.randomUUID()
    const turn = yield* session.session.send(content, { uuid }).pipe(Effect.mapError(failed(sessionID, "sending the prompt")))
    yield* session.inject({ _tag: "Prompted", prompt: { uuid, content, at: Date.now() } })
    // After the send, off the prompt's way to the CLI (a shared catalog's write is a round trip).
    // A store that is down does not stop the prompt: the session holds its events until it returns.
    yield* Effect.catchAll(core.catalog.save(sessionID, k), (e) => Effect.logWarning("SessionRegistry: the catalog missed a prompt's time", e))
    return { session, turn, before }
  })

const prompt = (core: Core) =>
  Effect.fn("SessionRegistry.prompt")(function*(sessionID: string, content: Content, options?: PromptOptions) {
    const { before, session, turn } = yield* send(core, sessionID, content, options)
    yield* turn.result.pipe(Effect.mapError(failed(sessionID, "the turn")))
    const last = Option.flatMap(yield* untilEnded(session, before, core.settle), lastAssistant)
    if (Option.isNone(last)) {
      return yield* new SessionFailed({ sessionID, reason: `the turn produced no assistant message (prompt: ${textOf(content).slice(0, 40)})` })
    }
    return last.value
  })

const abort = (core: Core) =>
  Effect.fn("SessionRegistry.abort")(function*(sessionID: string) {
    yield* core.catalog.lookup(sessionID)
    const session = yield* core.sessions.settled(sessionID)
    if (Option.isSome(session)) yield* Effect.ignore(session.value.session.interrupt)
    return true
  })

/** Busy sessions only, as opencode lists them. */
const status = (sessions: LiveSessions.LiveSessions) =>
  Effect.gen(function*() {
    const out: Record<string, Canonical.SessionStatus> = {}
    for (const [id, live] of yield* sessions.running) {
      if (yield* SubscriptionRef.get(live.busy)) out[id] = { type: "busy" }
    }
    return out
  })

/** The catalog seen through the roots: sessions outside them are neither listed nor found. */
const confined = (catalog: KnownSessions, roots: ReadonlyArray<string> | undefined): KnownSessions =>
  roots === undefined ? catalog : {
    ...catalog,
    lookup: (sessionID) =>
      Effect.filterOrFail(catalog.lookup(sessionID), (k) => insideRoots(roots, k.directory), () => new SessionNotFound({ sessionID })),
    list: (directory) => Effect.map(catalog.list(directory), (all) => all.filter(([, k]) => insideRoots(roots, k.directory)))
  }

/** The catalog, falling back on sessions known elsewhere. */
const shared = (catalog: KnownSessions, known: Options["known"]): KnownSessions =>
  known === undefined ? catalog : {
    ...catalog,
    lookup: (sessionID) =>
      Effect.catchTag(catalog.lookup(sessionID), "SessionNotFound", (notFound) =>
        Effect.flatMap(known(sessionID), Option.match({
          onNone: () => Effect.fail(notFound),
          onSome: (k) => Effect.sync(() => {
            const adopted: Known = { ...k }
            catalog.add(sessionID, adopted)
            return adopted
          })
        })))
  }

export const make = Effect.fn("SessionRegistry.make")(function*(options: Options) {
  const fs = yield* FileSystem.FileSystem
  const host = yield* ProcessHost.ProcessHost
  const events = yield* ServerEvents
  const broker = yield* PermissionBroker
  const index = yield* SessionIndex.make.pipe(Effect.provide(TranscriptLayout.layer(options.configDir)))
  const store = Option.getOrUndefined(yield* SessionStore.fromContext(options.askHost))
  const catalog = confined(shared(makeKnownSessions(index, options.configDir, store?.catalog), options.known), options.roots)
  const questions = Questions.make(options.questionTimeout ?? Permissions.defaultTimeout)
  const settle = options.settle ?? Duration.seconds(10)
  const transcriptOf = (k: Known) => Session.transcriptPath(options.configDir, k.directory, k.cliSessionId)

  const restore = (sessionID: string, k: Known): Effect.Effect<void, SessionFailed> =>
    store === undefined ? Effect.void : store.mirror.restore(k.cliSessionId, options.configDir).pipe(
      Effect.asVoid,
      Effect.catchTag("TranscriptNotMirrored", () => Effect.void),
      Effect.mapError(failed(sessionID, "restoring the transcript from the session store"))
    )
  const mirror = (sessionID: string, k: Known): Effect.Effect<void, SessionFailed> =>
    store === undefined ? Effect.void : store.mirror.sync({ configDir: options.configDir, cliSessionId: k.cliSessionId, sessionId: sessionID }).pipe(
      Effect.asVoid,
      Effect.mapError(failed(sessionID, "mirroring the transcript"))
    )

  /** Starts (or resumes) the session's CLI in the current scope, which owns it. */
  const start = (sessionID: string) =>
    Effect.gen(function*() {
      const k = yield* catalog.lookup(sessionID)
      // A transcript this disk lacks (or holds an older prefix of) comes from the store before `--resume`.
      yield* restore(sessionID, k)
      const resume = yield* Effect.orElseSucceed(fs.exists(transcriptOf(k)), () => false)
      const initial = yield* initialState(transcriptOf(k), k, resume, options.legacy ?? true)
      const session = yield* LiveSession.start({
        directory: k.directory,
        cliSessionId: k.cliSessionId,
        initial,
        events,
        broker,
        questions,
        store,
        session: sessionOptions(options, k, resume)
      })
      // A rename while the CLI started found no live session to tell.
      yield* session.inject({ _tag: "Retitled", title: k.title })
      return session
    }).pipe(
      Effect.mapError((error) => new SessionFailed({ sessionID, reason: error.message })),
      Effect.provideService(ProcessHost.ProcessHost, host),
      Effect.provideService(FileSystem.FileSystem, fs)
    )

  const sessions = yield* LiveSessions.make({
    start,
    idleTimeout: Duration.decode(options.idleTimeout ?? Duration.minutes(10))
  })

  /** An unknown id is refused before anything starts. */
  const live = (sessionID: string) => Effect.zipRight(catalog.lookup(sessionID), sessions.acquire(sessionID))

  const core: Core = {
    options,
    fs,
    events,
    index,
    catalog,
    sessions,
    transcriptOf,
    store,
    restore,
    mirror,
    live,
    stopLive: sessions.stop,
    settle
  }

  if (store !== undefined) {
    // Not fatal: a store that fails here fails the next write too, where it is reported.
    yield* SessionStore.closeOrphans(store, events).pipe(
      Effect.catchAll((error) => Effect.logWarning("SessionRegistry: could not close the asks an earlier run left open", error))
    )
  }

  return SessionRegistry.of({
    create: Effect.fn("SessionRegistry.create")(function*(input) {
      const cliSessionId = crypto.randomUUID()
      const sessionID = Ids.session(cliSessionId)
      const now = Date.now()
      const k: Known = { cliSessionId, directory: input.directory, title: input.title ?? `New session - ${new Date(now).toISOString()}`, created: now, updated: now }
      yield* catalog.add(sessionID, k)
      const info = infoOf(sessionID, k)
      yield* publishInfo(core, "session.created", info)
      return info
    }),
    list: (directory) =>
      Effect.map(catalog.list(directory), (all) => all.map(([id, k]) => infoOf(id, k)).sort((a, b) => b.time.updated - a.time.updated)),
    get: (sessionID) => Effect.map(catalog.lookup(sessionID), (k) => infoOf(sessionID, k)),
    update: update(core),
    remove: remove(core),
    children: (sessionID) =>
      Effect.zipRight(catalog.lookup(sessionID), Effect.map(catalog.list(), (all) => all.flatMap(([id, k]) => (k.parentID === sessionID ? [infoOf(id, k)] : [])))),
    messages: (sessionID) => messagesOf(core, sessionID),
    message: (sessionID, messageID) =>
      Effect.flatMap(messagesOf(core, sessionID), (all) => {
        const found = all.find((m) => m.info.id === messageID)
        return found === undefined ? new MessageNotFound({ sessionID, messageID }) : Effect.succeed(found)
      }),
    todo: (sessionID) => Effect.map(messagesOf(core, sessionID), Todos.todos),
    fork: (sessionID, input) => Effect.provideService(fork(core)(sessionID, input), FileSystem.FileSystem, fs),
    summarize: (sessionID) =>
      Effect.flatMap(send(core, sessionID, "/compact"), ({ turn }) =>
        Effect.mapError(turn.result, failed(sessionID, "compacting")).pipe(
          // The compacted transcript reaches the store now, whether or not its turn's end did.
          Effect.zipRight(Effect.flatMap(catalog.lookup(sessionID), (k) => mirror(sessionID, k)))
        )),
    prompt: prompt(core),
    promptAsync: (sessionID, content, promptOptions) =>
      // Queued in the session's turn order; its end reaches clients as events.
      Effect.as(
        send(core, sessionID, content, promptOptions),
        promptOptions?.messageID ?? Ids.make("msg", Ids.sortKey(Date.now(), Ids.PROMPT_ORDINAL), crypto.randomUUID())
      ),
    abort: abort(core),
    status: status(sessions),
    running: Effect.map(sessions.running, (all) => all.map(([id]) => id)),
    stop: core.stopLive,
    questions: (directory) => Effect.map(questions.pending(directory), (all) => all.map((p) => p.request)),
    answer: questions.answer
  })
})

export const layer = (options: Options) => Layer.scoped(SessionRegistry, make(options))
