/**
 * Writing and reading session transcripts in Claude Code's own JSONL format,
 * so that the real CLI can `--resume` what skein wrote and skein can read
 * what the CLI wrote.
 *
 * - One writer per session, an `Actor`: appends never interleave.
 * - Append-only; files 0600, folders 0700.
 * - The file appears at the first user or assistant entry; earlier entries
 *   (queue operations, metadata) wait in memory, and a session that never
 *   gets that far leaves no file.
 * - Metadata is appended like any entry, and `reAppendMetadata` copies the
 *   latest of each kind to the tail (after a compact summary, and when the
 *   writer's scope closes) so that `tailScan` finds it in the last few KB.
 * - Opening an existing file first cuts a torn last line (a crash mid-write);
 *   reading never fails on a bad line, it reports a diagnostic.
 * - Exclusive across processes: a writer holds the kernel's `FileLock` for
 *   its scope, and a session that another live process holds (its CLI is
 *   appending, as `SessionIndex` sees it) is refused before its tail is
 *   touched.
 * - Durable names: a created file, a new folder and every renamed-into-place
 *   file (`.meta.json`) are fsynced into their folder.
 *
 * @since 0.0.0
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Actor from "@skein/kernel/Actor"
import * as AtomicFile from "@skein/kernel/AtomicFile"
import * as FileLock from "@skein/kernel/FileLock"
import * as Lenient from "@skein/protocol/Lenient"
import * as Transcript from "@skein/protocol/Transcript"
import {
  Clock,
  Context,
  Duration,
  Effect,
  ExecutionStrategy,
  Layer,
  Option,
  Schedule,
  Schema,
  Scope,
  Stream
} from "effect"
import * as Path from "node:path"
import { TranscriptNotFound, TranscriptReadError } from "./ResumeLoader.js"
import * as Jsonl from "./internal/jsonlFile.js"
import * as LiveRegistry from "./internal/liveRegistry.js"
import * as TranscriptLayout from "./TranscriptLayout.js"

export {
  /**
   * @since 0.0.0
   */
  TranscriptNotFound,
  /**
   * @since 0.0.0
   */
  TranscriptReadError
}

/**
 * A cut torn tail, reported when a file is opened for appending.
 *
 * @since 0.0.0
 */
export type TornTail = Jsonl.TornTail

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/**
 * A write, fsync or folder creation failed. The writer refuses later appends,
 * since the file may now end in a partial line; reopen it to repair.
 *
 * @since 0.0.0
 */
export class TranscriptWriteError extends Schema.TaggedError<TranscriptWriteError>()("TranscriptWriteError", {
  path: Schema.String,
  message: Schema.String
}) {}

/**
 * Another writer holds the file, in this process or in another one (`pid`,
 * since `since`): its scope holds the file's lock. Retry once it has closed.
 *
 * @since 0.0.0
 */
export class TranscriptWriterBusy extends Schema.TaggedError<TranscriptWriterBusy>()("TranscriptWriterBusy", {
  path: Schema.String,
  pid: Schema.Number,
  since: Schema.DateFromSelf
}) {
  override get message(): string {
    return `${this.path} has a writer in pid ${this.pid} since ${this.since.toISOString()}`
  }
}

/**
 * Another live process holds the session (a CLI appending to it, or another
 * runtime's session): a second writer would interleave with it, and cutting
 * its in-flight last line would corrupt it. The file was left untouched.
 *
 * @since 0.0.0
 */
export class TranscriptLive extends Schema.TaggedError<TranscriptLive>()("TranscriptLive", {
  path: Schema.String,
  sessionId: Schema.String,
  pid: Schema.Number
}) {
  override get message(): string {
    return `session ${this.sessionId} is live in pid ${this.pid}, which may be appending to ${this.path}`
  }
}

/**
 * The writer was closed (its scope ended) before the request was handled.
 *
 * @since 0.0.0
 */
export class TranscriptWriterClosed extends Schema.TaggedError<TranscriptWriterClosed>()("TranscriptWriterClosed", {
  path: Schema.String
}) {}

// ---------------------------------------------------------------------------
// Entries
// ---------------------------------------------------------------------------

/**
 * What a writer appends: a known transcript entry, or any JSON object with a
 * `type` (the CLI has many entry kinds this package does not model).
 *
 * @since 0.0.0
 */
export type Entry = Transcript.Entry | Lenient.JsonObject

/**
 * @since 0.0.0
 */
export const entryType = (entry: Entry): string | undefined =>
  "type" in entry && typeof entry.type === "string" ? entry.type : undefined

/**
 * Metadata kinds where the last entry wins, in the order `reAppendMetadata` writes them.
 *
 * @since 0.0.0
 */
export const metadataTypes: ReadonlyArray<string> = [
  "custom-title",
  "ai-title",
  "tag",
  "agent-name",
  "mode",
  "cost-state",
  "last-prompt"
]

const isMetadataType = (type: string | undefined): type is string => type !== undefined && metadataTypes.includes(type)

/** Entries that make the file exist: a conversation has started. */
const startsFile = (entry: Entry): boolean => {
  const type = entryType(entry)
  return type === "user" || type === "assistant"
}

const isCompactSummary = (entry: Entry): boolean =>
  entryType(entry) === "user" && "isCompactSummary" in entry && entry.isCompactSummary === true

/** @since 0.0.0 */
export const customTitle = (sessionId: string, customTitle: string): Transcript.CustomTitle => ({
  type: "custom-title",
  customTitle,
  sessionId
})

/** @since 0.0.0 */
export const aiTitle = (sessionId: string, aiTitle: string): Transcript.AiTitle => ({ type: "ai-title", aiTitle, sessionId })

/** @since 0.0.0 */
export const tag = (sessionId: string, tag: string): Transcript.Tag => ({ type: "tag", tag, sessionId })

/** @since 0.0.0 */
export const agentName = (sessionId: string, agentName: string): Transcript.AgentName => ({
  type: "agent-name",
  agentName,
  sessionId
})

/** @since 0.0.0 */
export const mode = (sessionId: string, mode: string): Transcript.Mode => ({ type: "mode", mode, sessionId })

/**
 * The last prompt and the leaf a resume continues from.
 *
 * @since 0.0.0
 */
export const lastPrompt = (sessionId: string, lastPrompt: string, leafUuid: string): Transcript.LastPrompt => ({
  type: "last-prompt",
  lastPrompt,
  leafUuid,
  sessionId
})

/**
 * The cost state; extra fields (durations, line counts, …) ride along.
 *
 * @since 0.0.0
 */
export const costState = (
  sessionId: string,
  state: { readonly totalCostUSD: number; readonly [key: string]: unknown }
): Lenient.JsonObject => ({ ...state, type: "cost-state", sessionId })

// ---------------------------------------------------------------------------
// Fsync policy
// ---------------------------------------------------------------------------

/**
 * When appended bytes are forced to disk.
 * - `PerEntry`: every append returns after its bytes were fsynced; what an
 *   append acknowledged survives a crash of the process or the machine.
 * - `Batched`: fsync once `entries` entries are unsynced, or every
 *   `interval`, whichever comes first. An acknowledged append survives a
 *   crash of the process (the bytes are in the kernel), not of the machine.
 *
 * @since 0.0.0
 */
export type FsyncPolicy =
  | { readonly _tag: "PerEntry" }
  | { readonly _tag: "Batched"; readonly entries: number; readonly interval: Duration.DurationInput }

/** @since 0.0.0 */
export const perEntry: FsyncPolicy = { _tag: "PerEntry" }

/** @since 0.0.0 */
export const batched = (options: { readonly entries: number; readonly interval: Duration.DurationInput }): FsyncPolicy => ({
  _tag: "Batched",
  ...options
})

// ---------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------

/**
 * @since 0.0.0
 */
export interface WriterOptions {
  /** Default `perEntry`. */
  readonly fsync?: FsyncPolicy | undefined
  /** Create the file only at the first user or assistant entry. Default true. */
  readonly lazy?: boolean | undefined
  /** Re-append the latest metadata when the scope closes. Default true. */
  readonly reAppendOnClose?: boolean | undefined
  /** How much of an existing file's end is scanned for its metadata. Default 64 KiB. */
  readonly tailScanBytes?: number | undefined
}

/**
 * Which file a writer writes, and what makes it the only writer.
 *
 * @since 0.0.0
 */
export interface WriterTarget {
  readonly path: string
  readonly sessionId: string
  /**
   * The `FileLock` held for the writer's scope, shared by every process.
   * Writers of one file must agree on it. Default `lockPathOf(path)`;
   * `TranscriptStore` writers use `lockPathOf(path, root)`.
   */
  readonly lockPath?: string | undefined
  /**
   * A config root whose live sessions (skein's live markers and the CLI's
   * own registry, as `SessionIndex` reads them) are checked: if another live
   * process holds `sessionId`, opening fails with `TranscriptLive` and
   * leaves the file as it is. Leave it out for sidechains, which the
   * parent's live CLI never writes.
   */
  readonly liveRoot?: string | undefined
}

/**
 * The single writer of one transcript file.
 *
 * @since 0.0.0
 */
export interface Writer {
  readonly path: string
  readonly sessionId: string
  /** What opening cut from an existing file's end. */
  readonly repairs: ReadonlyArray<TornTail>
  /** Returns once the entry is written (and fsynced under `perEntry`). */
  readonly append: (entry: Entry) => Effect.Effect<void, TranscriptWriteError | TranscriptWriterClosed>
  /** Appends entries in one write. */
  readonly appendAll: (entries: ReadonlyArray<Entry>) => Effect.Effect<void, TranscriptWriteError | TranscriptWriterClosed>
  /** Copies the latest entry of each metadata kind to the tail; a no-op if the tail already is that. */
  readonly reAppendMetadata: Effect.Effect<void, TranscriptWriteError | TranscriptWriterClosed>
  /** Fsyncs what is unsynced. */
  readonly flush: Effect.Effect<void, TranscriptWriteError | TranscriptWriterClosed>
  /** Whether the file exists yet. */
  readonly created: Effect.Effect<boolean>
  /** The latest entry of each metadata kind, by type. */
  readonly metadata: Effect.Effect<ReadonlyMap<string, Entry>>
}

/**
 * Where the lock of a transcript's writer lives: under
 * `<root>/skein/locks/`, mirroring the transcript's place below `root`,
 * when the transcript is inside `root` (so the CLI's folders hold only its
 * own files, and a session that never starts leaves no folder there);
 * otherwise beside the file, as `<path>.lock`.
 *
 * @since 0.0.0
 */
export const lockPathOf = (path: string, root?: string): string => {
  if (root !== undefined) {
    const relative = Path.relative(root, path)
    if (relative !== "" && !relative.startsWith("..") && !Path.isAbsolute(relative)) {
      return Path.join(root, "skein", "locks", `${relative}.lock`)
    }
  }
  return `${path}.lock`
}

type Reply = Actor.Reply<void, TranscriptWriteError>

type Message =
  | { readonly _tag: "Append"; readonly entries: ReadonlyArray<Entry>; readonly reply: Reply }
  | { readonly _tag: "ReAppend"; readonly reply: Reply }
  | { readonly _tag: "Flush"; readonly reply: Reply | undefined }

interface State {
  readonly file: FileSystem.File | undefined
  /** Lines waiting for the file to be created. */
  readonly pending: ReadonlyArray<string>
  readonly unsynced: number
  readonly latest: ReadonlyMap<string, Entry>
  /** The file ends with a re-append and nothing was written since. */
  readonly tailIsMetadata: boolean
  /** Set after a failed write: the file may end in a partial line. */
  readonly broken: string | undefined
}

const encoder = new TextEncoder()

const line = (entry: Entry): string => `${JSON.stringify(entry)}\n`

const toWriteError = (path: string) => (error: PlatformError | string) =>
  new TranscriptWriteError({ path, message: typeof error === "string" ? error : error.message })

/**
 * Holds the writer's lock for the current scope. It is taken with the real
 * clock (its stamps are read by other processes) and never goes stale: only
 * a dead holder's lock is taken over.
 */
const exclusive = (path: string, lockPath: string) =>
  Effect.gen(function*() {
    yield* Effect.mapError(AtomicFile.makeDirectory(Path.dirname(lockPath)), toWriteError(path))
    yield* FileLock.acquire(lockPath, { staleAfter: Duration.infinity }).pipe(
      Effect.withClock(Clock.make()),
      Effect.catchTags({
        LockHeld: (held) => new TranscriptWriterBusy({ path, pid: held.pid, since: held.since }),
        FileLockError: (error) => toWriteError(path)(error.message)
      })
    )
  })

/** Fails with `TranscriptLive` when another live process holds `sessionId` under `root`. */
const refuseLive = (path: string, sessionId: string, root: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => LiveRegistry.liveSessions(fs, root)).pipe(
    Effect.mapError(toWriteError(path)),
    Effect.flatMap((live) => {
      const pid = live.get(sessionId)
      return pid === undefined || pid === process.pid
        ? Effect.void
        : Effect.fail(new TranscriptLive({ path, sessionId, pid }))
    })
  )

/** Cuts a torn tail of an existing file and reads its latest metadata back. */
const resumeExisting = (path: string, tailScanBytes: number | undefined) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const repairs = yield* Effect.mapError(Jsonl.repairTail(fs, path), toWriteError(path))
    for (const repair of repairs) {
      yield* Effect.logWarning("TranscriptStore: cut a torn tail before appending").pipe(
        Effect.annotateLogs({ path, offset: repair.offset, bytes: repair.bytes, reason: repair.reason })
      )
    }
    const tail = yield* Effect.mapError(
      tailScan(path, { bytes: tailScanBytes }),
      (error) => toWriteError(path)(error._tag === "TranscriptNotFound" ? "the file vanished" : error.message)
    )
    return { repairs, latest: tail.latest }
  })

/** The actor's message handler: appends, re-appends and fsyncs, one message at a time. */
const writerHandler = (options: {
  readonly path: string
  readonly policy: FsyncPolicy
  /** Creates the file (and its folders), durably. */
  readonly create: Effect.Effect<FileSystem.File, PlatformError>
}) => {
  const { create, path, policy } = options
  const sync = (state: State): Effect.Effect<State, PlatformError> =>
    state.file === undefined || state.unsynced === 0
      ? Effect.succeed(state)
      : Effect.as(state.file.sync, { ...state, unsynced: 0 })

  const write = (state: State, lines: ReadonlyArray<string>, count: number): Effect.Effect<State, PlatformError> =>
    Effect.gen(function*() {
      const target = state.file ?? (yield* create)
      const text = state.pending.join("") + lines.join("")
      yield* target.writeAll(encoder.encode(text))
      const next: State = { ...state, file: target, pending: [], unsynced: state.unsynced + count + state.pending.length }
      const due = policy._tag === "PerEntry" || next.unsynced >= policy.entries
      return due ? yield* sync(next) : next
    })

  const reAppend = (state: State): Effect.Effect<State, PlatformError> => {
    if (state.file === undefined || state.tailIsMetadata) return Effect.succeed(state)
    const lines: Array<string> = []
    for (const type of metadataTypes) {
      const entry = state.latest.get(type)
      if (entry !== undefined) lines.push(line(entry))
    }
    if (lines.length === 0) return Effect.succeed(state)
    return Effect.map(write(state, lines, lines.length), (next) => ({ ...next, tailIsMetadata: true }))
  }

  const append = (state: State, entries: ReadonlyArray<Entry>): Effect.Effect<State, PlatformError> => {
    const latest = new Map(state.latest)
    for (const entry of entries) {
      const type = entryType(entry)
      if (isMetadataType(type)) latest.set(type, entry)
    }
    const lines = entries.map(line)
    const withLatest: State = { ...state, latest, tailIsMetadata: false }
    if (withLatest.file === undefined && !entries.some(startsFile)) {
      return Effect.succeed({ ...withLatest, pending: [...withLatest.pending, ...lines] })
    }
    return write(withLatest, lines, entries.length).pipe(
      Effect.flatMap((next) => entries.some(isCompactSummary) ? reAppend(next) : Effect.succeed(next))
    )
  }

  const guarded = (
    state: State,
    reply: Reply | undefined,
    f: (state: State) => Effect.Effect<State, PlatformError>
  ): Effect.Effect<State> => {
    if (state.broken !== undefined) {
      const error = toWriteError(path)(`an earlier write failed: ${state.broken}`)
      return Effect.as(reply === undefined ? Effect.void : reply.fail(error), state)
    }
    return f(state).pipe(
      Effect.tap(() => reply === undefined ? Effect.void : reply.succeed(undefined)),
      Effect.catchAll((error) =>
        Effect.gen(function*() {
          yield* Effect.logError("TranscriptStore: write failed").pipe(Effect.annotateLogs({ path, error: error.message }))
          if (reply !== undefined) yield* reply.fail(toWriteError(path)(error))
          return { ...state, broken: error.message }
        })
      )
    )
  }

  return (state: State, message: Message): Effect.Effect<State> => {
    switch (message._tag) {
      case "Append":
        return guarded(state, message.reply, (state) => append(state, message.entries))
      case "ReAppend":
        return guarded(state, message.reply, reAppend)
      case "Flush":
        return guarded(state, message.reply, sync)
    }
  }
}

/**
 * Opens the writer of one transcript file in the current scope.
 *
 * - It holds the file's `FileLock` (see `WriterTarget.lockPath`) for the
 *   scope: a second writer, in this process or another, fails at once with
 *   `TranscriptWriterBusy` naming the holder's pid. It does not wait: the
 *   holder is usually a whole session, and a caller that wants to wait can
 *   retry on that error.
 * - With `liveRoot`, a session another live process holds (its CLI is
 *   appending) fails with `TranscriptLive` before anything is read or cut.
 * - An existing file is then repaired (see `TornTail`) and its latest
 *   metadata is read back from its tail. A file it creates, and its new
 *   folders, are fsynced into their folders.
 * - Closing the scope re-appends the metadata (unless disabled), fsyncs,
 *   closes the file, and gives the lock back.
 *
 * @since 0.0.0
 */
export const makeWriter = Effect.fn("TranscriptStore.makeWriter")(function*(
  options: WriterOptions & WriterTarget
): Effect.fn.Return<
  Writer,
  TranscriptWriteError | TranscriptWriterBusy | TranscriptLive,
  Scope.Scope | FileSystem.FileSystem
> {
  const fs = yield* FileSystem.FileSystem
  const scope = yield* Effect.scope
  const path = options.path
  const policy = options.fsync ?? perEntry
  yield* exclusive(path, options.lockPath ?? lockPathOf(path))
  if (options.liveRoot !== undefined) yield* refuseLive(path, options.sessionId, options.liveRoot)

  // Closed after the actor has written its final re-append, and before the lock is given back.
  const fileScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
  const openFile = (isNew: boolean) =>
    Effect.gen(function*() {
      yield* AtomicFile.makeDirectory(Path.dirname(path))
      const file = yield* Scope.extend(fs.open(path, { flag: "a", mode: 0o600 }), fileScope)
      // The new name is in the folder only once the folder is synced.
      if (isNew) yield* AtomicFile.syncDirectory(Path.dirname(path))
      return file
    }).pipe(Effect.provideService(FileSystem.FileSystem, fs))

  const existing = (yield* Effect.mapError(fs.exists(path), toWriteError(path)))
    ? yield* resumeExisting(path, options.tailScanBytes)
    : undefined
  const file = existing !== undefined || options.lazy === false
    ? yield* Effect.mapError(openFile(existing === undefined), toWriteError(path))
    : undefined

  const actor = yield* Actor.make<State, Message>({
    name: `transcript:${options.sessionId}`,
    initial: {
      file,
      pending: [],
      unsynced: 0,
      latest: existing?.latest ?? new Map(),
      tailIsMetadata: false,
      broken: undefined
    },
    handle: writerHandler({ path, policy, create: openFile(true) })
  })

  const ask = (f: (reply: Reply) => Message) =>
    actor.ask<void, TranscriptWriteError>(f).pipe(
      Effect.catchTags({
        ActorStopped: () => new TranscriptWriterClosed({ path }),
        ActorDied: () => new TranscriptWriterClosed({ path }),
        MailboxFull: () => new TranscriptWriterClosed({ path })
      })
    )

  if (policy._tag === "Batched") {
    yield* actor.tell({ _tag: "Flush", reply: undefined }).pipe(
      Effect.repeat(Schedule.spaced(policy.interval)),
      Effect.forkScoped
    )
  }

  const reAppendOnClose = options.reAppendOnClose !== false
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      if (reAppendOnClose) yield* ask((reply) => ({ _tag: "ReAppend", reply }))
      yield* ask((reply) => ({ _tag: "Flush", reply }))
    }).pipe(
      Effect.catchAll((error) =>
        Effect.logWarning("TranscriptStore: closing the writer failed").pipe(
          Effect.annotateLogs({ path, error: error._tag })
        )
      )
    )
  )

  const appendAll = (entries: ReadonlyArray<Entry>) =>
    entries.length === 0 ? Effect.void : ask((reply) => ({ _tag: "Append", entries, reply }))

  return {
    path,
    sessionId: options.sessionId,
    repairs: existing?.repairs ?? [],
    append: (entry) => appendAll([entry]),
    appendAll,
    reAppendMetadata: ask((reply) => ({ _tag: "ReAppend", reply })),
    flush: ask((reply) => ({ _tag: "Flush", reply })),
    created: Effect.map(actor.state.get, (state) => state.file !== undefined),
    metadata: Effect.map(actor.state.get, (state) => state.latest)
  }
})

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

const readError = (path: string) => (error: PlatformError) =>
  error._tag === "SystemError" && error.reason === "NotFound"
    ? new TranscriptNotFound({ path })
    : new TranscriptReadError({ path, message: error.message })

/**
 * Every line of a transcript, decoded leniently: entries, unknown kinds and
 * diagnostics, in file order, streamed from disk. Bad lines never fail it.
 *
 * @since 0.0.0
 */
export const stream = (
  path: string
): Stream.Stream<Lenient.Decoded<Transcript.Entry>, TranscriptNotFound | TranscriptReadError, FileSystem.FileSystem> =>
  Stream.unwrap(Effect.map(FileSystem.FileSystem, (fs) =>
    fs.stream(path, { chunkSize: 256 * 1024 }).pipe(
      Stream.mapError(readError(path)),
      Lenient.decodeStream(Transcript.decoder)
    )))

/**
 * A whole transcript.
 *
 * @since 0.0.0
 */
export interface ReadResult {
  readonly path: string
  /** Known entries, in file order. */
  readonly entries: ReadonlyArray<Transcript.Entry>
  /** Objects of kinds the decoder does not know, kept as they are. */
  readonly unknown: ReadonlyArray<Lenient.Unknown>
  /** Lines that were skipped. */
  readonly diagnostics: ReadonlyArray<Lenient.Diagnostic>
}

/**
 * Reads a whole transcript into memory. Malformed lines are skipped and
 * reported (and logged at debug level); they never fail the read.
 *
 * @since 0.0.0
 */
export const read = Effect.fn("TranscriptStore.read")(function*(
  path: string
): Effect.fn.Return<ReadResult, TranscriptNotFound | TranscriptReadError, FileSystem.FileSystem> {
  const entries: Array<Transcript.Entry> = []
  const unknown: Array<Lenient.Unknown> = []
  const diagnostics: Array<Lenient.Diagnostic> = []
  yield* Stream.runForEach(stream(path), (decoded) =>
    Effect.sync(() => {
      switch (decoded._tag) {
        case "Message":
          entries.push(decoded.message)
          break
        case "Unknown":
          unknown.push(decoded)
          break
        default:
          diagnostics.push(decoded)
      }
    }))
  if (diagnostics.length > 0) {
    yield* Effect.logDebug("TranscriptStore: skipped malformed lines").pipe(
      Effect.annotateLogs({ path, lines: diagnostics.map((d) => d.line).join(",") })
    )
  }
  return { path, entries, unknown, diagnostics }
})

/**
 * The latest metadata found in a transcript's last bytes.
 *
 * @since 0.0.0
 */
export interface TailMetadata {
  readonly customTitle: string | undefined
  readonly aiTitle: string | undefined
  readonly tag: string | undefined
  readonly agentName: string | undefined
  readonly mode: string | undefined
  readonly lastPrompt: string | undefined
  /** From the latest `last-prompt`: the leaf a resume continues from. */
  readonly leafUuid: string | undefined
  readonly costState: Transcript.CostState | undefined
  /** The latest entry of each kind in `metadataTypes`, by type. */
  readonly latest: ReadonlyMap<string, Entry>
  /** The timestamp of the last entry in the window that has one. */
  readonly lastTimestamp: string | undefined
  readonly fileBytes: number
  readonly scannedBytes: number
  /** Lines in the window that did not decode (a torn last line shows up here). */
  readonly diagnostics: ReadonlyArray<Lenient.Diagnostic>
}

/** @since 0.0.0 */
export const defaultTailScanBytes = 64 * 1024

const lastLineBreak = (bytes: Uint8Array): number => bytes.lastIndexOf(Jsonl.NEWLINE)

/**
 * Reads the latest metadata from the last `bytes` of a transcript (default
 * 64 KiB) without reading the rest. The first, partial line of the window is
 * skipped.
 *
 * @since 0.0.0
 */
export const tailScan = Effect.fn("TranscriptStore.tailScan")(function*(
  path: string,
  options?: { readonly bytes?: number | undefined }
): Effect.fn.Return<TailMetadata, TranscriptNotFound | TranscriptReadError, FileSystem.FileSystem> {
  const fs = yield* FileSystem.FileSystem
  const window = options?.bytes ?? defaultTailScanBytes
  const bytes = yield* Effect.scoped(Effect.gen(function*() {
    const file = yield* fs.open(path, { flag: "r" })
    const size = Number((yield* file.stat).size)
    const start = Math.max(0, size - window)
    return { size, start, data: yield* Jsonl.readAt(file, start, size - start) }
  })).pipe(Effect.mapError(readError(path)))
  let data = bytes.data
  if (bytes.start > 0) {
    const first = data.indexOf(Jsonl.NEWLINE)
    data = first === -1 ? new Uint8Array(0) : data.subarray(first + 1)
  }
  // A line with no newline yet is being written (or was torn): not metadata.
  const end = lastLineBreak(data)
  const decoded = Lenient.decodeAll(Transcript.decoder, data.subarray(0, end + 1))
  const latest = new Map<string, Entry>()
  const diagnostics: Array<Lenient.Diagnostic> = []
  let lastTimestamp: string | undefined
  for (const item of decoded) {
    if (item._tag === "Message") {
      const entry = item.message
      if (isMetadataType(entry.type)) latest.set(entry.type, entry)
      if ("timestamp" in entry) lastTimestamp = entry.timestamp
    } else if (item._tag === "Unknown") {
      const type = item.type
      if (isMetadataType(type)) latest.set(type, item.json)
      const timestamp = item.json["timestamp"]
      if (typeof timestamp === "string") lastTimestamp = timestamp
    } else {
      diagnostics.push(item)
    }
  }
  const pick = <K extends Transcript.MetadataEntry["type"]>(type: K) => {
    const entry = latest.get(type)
    return entry !== undefined && entryType(entry) === type ? entry : undefined
  }
  const str = (entry: Entry | undefined, key: string): string | undefined => {
    if (entry === undefined || !(key in entry)) return undefined
    const value: unknown = Reflect.get(entry, key)
    return typeof value === "string" ? value : undefined
  }
  const cost = pick("cost-state")
  return {
    customTitle: str(pick("custom-title"), "customTitle"),
    aiTitle: str(pick("ai-title"), "aiTitle"),
    tag: str(pick("tag"), "tag"),
    agentName: str(pick("agent-name"), "agentName"),
    mode: str(pick("mode"), "mode"),
    lastPrompt: str(pick("last-prompt"), "lastPrompt"),
    leafUuid: str(pick("last-prompt"), "leafUuid"),
    costState: cost !== undefined && Schema.is(Transcript.CostState)(cost) ? cost : undefined,
    latest,
    lastTimestamp,
    fileBytes: bytes.size,
    scannedBytes: bytes.data.length,
    diagnostics
  }
})

// ---------------------------------------------------------------------------
// Sidechains (subagent transcripts)
// ---------------------------------------------------------------------------

/**
 * Writes a subagent's `.meta.json` (0600), replacing any earlier one: through
 * a synced temp file renamed into place, then a sync of the folder, so it is
 * the old file or the new one even after a power loss.
 *
 * @since 0.0.0
 */
export const writeSubagentMeta = Effect.fn("TranscriptStore.writeSubagentMeta")(function*(
  paths: TranscriptLayout.SubagentPaths,
  meta: Lenient.JsonObject
): Effect.fn.Return<void, TranscriptWriteError, FileSystem.FileSystem> {
  yield* AtomicFile.makeDirectory(Path.dirname(paths.meta)).pipe(
    Effect.zipRight(AtomicFile.write(paths.meta, `${JSON.stringify(meta)}\n`)),
    Effect.mapError((error) => new TranscriptWriteError({ path: paths.meta, message: error.message }))
  )
})

/**
 * A subagent's `.meta.json`, if it has one and it is a JSON object.
 *
 * @since 0.0.0
 */
export const readSubagentMeta = Effect.fn("TranscriptStore.readSubagentMeta")(function*(
  paths: TranscriptLayout.SubagentPaths
): Effect.fn.Return<Option.Option<Lenient.JsonObject>, TranscriptReadError, FileSystem.FileSystem> {
  const fs = yield* FileSystem.FileSystem
  const text = yield* fs.readFileString(paths.meta).pipe(
    Effect.map(Option.some),
    Effect.catchAll((error) =>
      error._tag === "SystemError" && error.reason === "NotFound"
        ? Effect.succeed(Option.none<string>())
        : new TranscriptReadError({ path: paths.meta, message: error.message })
    )
  )
  return Option.flatMap(text, (text) => {
    try {
      const value: unknown = JSON.parse(text)
      return typeof value === "object" && value !== null && !Array.isArray(value) ? Option.some({ ...value }) : Option.none()
    } catch {
      return Option.none()
    }
  })
})

/**
 * The agent ids of a session's subagent transcripts.
 *
 * @since 0.0.0
 */
export const listSubagents = Effect.fn("TranscriptStore.listSubagents")(function*(
  paths: TranscriptLayout.SessionPaths
): Effect.fn.Return<ReadonlyArray<string>, TranscriptReadError, FileSystem.FileSystem> {
  const fs = yield* FileSystem.FileSystem
  const names = yield* fs.readDirectory(paths.subagentsDir).pipe(
    Effect.catchAll((error) =>
      error._tag === "SystemError" && error.reason === "NotFound"
        ? Effect.succeed<ReadonlyArray<string>>([])
        : new TranscriptReadError({ path: paths.subagentsDir, message: error.message })
    )
  )
  return names.flatMap((name) => Option.toArray(TranscriptLayout.agentIdOfFile(name))).sort()
})

// ---------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------

/**
 * Transcripts under a `TranscriptLayout` root, with at most one writer per
 * file across processes. Writer locks live under `<root>/skein/locks/`.
 *
 * @since 0.0.0
 */
export class TranscriptStore extends Context.Tag("@skein/store/TranscriptStore")<TranscriptStore, {
  readonly layout: TranscriptLayout.TranscriptLayout["Type"]
  /**
   * The writer of a session's main chain, for the scope's lifetime. Fails
   * with `TranscriptWriterBusy` while another writer has it, and with
   * `TranscriptLive` while another live process (the session's CLI) holds
   * the session; in both cases the file is left untouched.
   */
  readonly open: (
    options: WriterOptions & { readonly cwd: string; readonly sessionId: string }
  ) => Effect.Effect<Writer, TranscriptWriteError | TranscriptWriterBusy | TranscriptLive, Scope.Scope>
  /**
   * The writer of a subagent transcript (`<sessionId>/subagents/agent-<agentId>.jsonl`),
   * then writing `meta` to its `.meta.json` when given. Its entries stay out
   * of the main chain, so the parent session may be live meanwhile.
   */
  readonly openSidechain: (
    options: WriterOptions & {
      readonly cwd: string
      readonly sessionId: string
      readonly agentId: string
      readonly meta?: Lenient.JsonObject | undefined
    }
  ) => Effect.Effect<Writer, TranscriptWriteError | TranscriptWriterBusy, Scope.Scope>
  readonly read: (cwd: string, sessionId: string) => Effect.Effect<ReadResult, TranscriptNotFound | TranscriptReadError>
  readonly readSidechain: (
    cwd: string,
    sessionId: string,
    agentId: string
  ) => Effect.Effect<
    { readonly transcript: ReadResult; readonly meta: Option.Option<Lenient.JsonObject> },
    TranscriptNotFound | TranscriptReadError
  >
  readonly tailScan: (
    cwd: string,
    sessionId: string,
    options?: { readonly bytes?: number | undefined }
  ) => Effect.Effect<TailMetadata, TranscriptNotFound | TranscriptReadError>
}>() {}

/**
 * @since 0.0.0
 */
export const make = Effect.gen(function*() {
  const layout = yield* TranscriptLayout.TranscriptLayout
  const fs = yield* FileSystem.FileSystem
  const provideFs = Effect.provideService(FileSystem.FileSystem, fs)
  const lockPath = (path: string) => lockPathOf(path, layout.root)

  return TranscriptStore.of({
    layout,
    open: (options) => {
      const path = layout.session(options.cwd, options.sessionId).transcript
      return provideFs(makeWriter({ ...options, path, lockPath: lockPath(path), liveRoot: layout.root }))
    },
    openSidechain: (options) =>
      Effect.gen(function*() {
        const paths = layout.session(options.cwd, options.sessionId).subagent(options.agentId)
        const writer = yield* makeWriter({ ...options, path: paths.transcript, lockPath: lockPath(paths.transcript) }).pipe(
          // Only a writer given `liveRoot` checks liveness.
          Effect.catchTag("TranscriptLive", Effect.die)
        )
        if (options.meta !== undefined) yield* writeSubagentMeta(paths, options.meta)
        return writer
      }).pipe(provideFs),
    read: (cwd, sessionId) =>
      read(layout.session(cwd, sessionId).transcript).pipe(Effect.provideService(FileSystem.FileSystem, fs)),
    readSidechain: (cwd, sessionId, agentId) =>
      Effect.gen(function*() {
        const paths = layout.session(cwd, sessionId).subagent(agentId)
        const transcript = yield* read(paths.transcript)
        const meta = yield* readSubagentMeta(paths)
        return { transcript, meta }
      }).pipe(Effect.provideService(FileSystem.FileSystem, fs)),
    tailScan: (cwd, sessionId, options) =>
      tailScan(layout.session(cwd, sessionId).transcript, options).pipe(
        Effect.provideService(FileSystem.FileSystem, fs)
      )
  })
})

/**
 * @since 0.0.0
 */
export const layer: Layer.Layer<TranscriptStore, never, TranscriptLayout.TranscriptLayout | FileSystem.FileSystem> =
  Layer.effect(TranscriptStore, make)
