/**
 * Child processes as scoped resources. Each child leads its own process group,
 * so a stop reaches the whole tree it started, and closing the spawn's Scope
 * always ends with SIGKILL to that group, even when the leader already exited
 * and left background grandchildren behind.
 *
 * A group does not hold a descendant that calls setsid (the Claude Code CLI
 * runs every Bash command that way). So each child also gets an environment
 * marker unique to it (`SKEIN_PROCESS=<runtime id>.<n>`, appended to any
 * marker this process inherited); after the group SIGKILL, scope close
 * SIGKILLs every process whose `/proc/<pid>/environ` carries it, and the
 * journal records it so that reaping after a crash does the same. Linux only:
 * elsewhere the marker is set but nothing scans for it. The scan at scope
 * close reads the environment of the pids given since the children started
 * only (`internal/pidWindow.ts`), every pid when that cannot be told.
 *
 * @since 0.0.0
 */
import type { FileSystem } from "@effect/platform/FileSystem"
import type { Path } from "@effect/platform/Path"
import type { Chunk, Option, Scope, Stream } from "effect"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import * as internal from "./internal/processHost.js"
import * as procfs from "./internal/procfs.js"
import * as ProcessJournal from "./ProcessJournal.js"

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/**
 * The program could not be started (ENOENT, EACCES, a missing cwd, …).
 *
 * @since 0.0.0
 */
export class SpawnError extends Schema.TaggedError<SpawnError>()("SpawnError", {
  command: Schema.String,
  args: Schema.Array(Schema.String),
  /** The errno code when there is one, e.g. `ENOENT`. */
  code: Schema.optional(Schema.String),
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot spawn ${this.command}: ${this.reason}`
  }
}

/**
 * A write to stdin after it was closed, after the child exited, or after the
 * pipe broke (EPIPE).
 *
 * @since 0.0.0
 */
export class StdinClosed extends Schema.TaggedError<StdinClosed>()("StdinClosed", {
  pid: Schema.Number,
  reason: Schema.String
}) {
  override get message(): string {
    return `stdin of process ${this.pid} is closed: ${this.reason}`
  }
}

// ---------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------

/**
 * How a child ended. `code` is null when a signal ended it, `signal` is null
 * when it exited by itself. `stderrTail` holds the last 8 KB of stderr.
 *
 * @since 0.0.0
 */
export interface ExitStatus {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stderrTail: string
}

/**
 * The delays of the stop escalation: close stdin, wait `stdinGrace`, SIGTERM
 * the group, wait `termGrace`, SIGKILL the group.
 *
 * @since 0.0.0
 */
export interface StopTimeouts {
  readonly stdinGrace: Duration.DurationInput
  readonly termGrace: Duration.DurationInput
}

/**
 * Whether a process exists and is not a zombie (a zombie holds nothing: no
 * lock, no session). Reads `/proc` where there is one, else signal 0.
 *
 * @since 0.0.0
 */
export const isAlive: (pid: number) => boolean = procfs.isLive

/**
 * @since 0.0.0
 */
export const defaultStopTimeouts: StopTimeouts = {
  stdinGrace: Duration.seconds(2),
  termGrace: Duration.seconds(3)
}

/**
 * @since 0.0.0
 */
export interface SpawnOptions {
  readonly command: string
  /** Passed to the program as is: there is no shell. */
  readonly args?: ReadonlyArray<string> | undefined
  readonly cwd?: string | undefined
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /** `merge` (default) layers `env` over `process.env`; `replace` uses `env` alone. */
  readonly envMode?: "merge" | "replace" | undefined
  /** Overrides the host's defaults for this child. */
  readonly stopTimeouts?: Partial<StopTimeouts> | undefined
  /** Free text kept in logs and in the journal. */
  readonly label?: string | undefined
}

/**
 * A running child. Its lifetime is the Scope it was spawned in.
 *
 * @since 0.0.0
 */
export interface ChildProcess {
  readonly pid: number
  /** Equal to `pid`: the child leads its own group. */
  readonly pgid: number
  /**
   * This child's marker: `SKEIN_PROCESS` in its environment (and so in that
   * of all it starts) lists it. Scope close SIGKILLs every process carrying
   * it, on Linux, which reaches descendants that left the group with setsid.
   */
  readonly marker: string
  readonly command: string
  readonly args: ReadonlyArray<string>
  /**
   * Raw stdout bytes, read on demand: while nobody pulls, the pipe fills and
   * the child blocks. Consume it once.
   */
  readonly stdout: Stream.Stream<Uint8Array>
  /**
   * The same bytes as a pull (`stdout` is this pull, repeated): what the pipe
   * holds now, waiting for some when it holds none; fails with `None` at the
   * end. For a reader that lives as long as the child it costs less than the
   * stream. Use one of the two.
   */
  readonly pullStdout: Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<never>>
  /**
   * Raw stderr bytes. stderr is read eagerly so that the tail stays current;
   * when nobody pulls, the oldest unread chunks are dropped. Consume it once.
   */
  readonly stderr: Stream.Stream<Uint8Array>
  /** Waits for `drain` when the pipe is full. */
  readonly write: (data: Uint8Array | string) => Effect.Effect<void, StdinClosed>
  /** Ends stdin; later writes fail with StdinClosed. Idempotent. */
  readonly closeStdin: Effect.Effect<void>
  /** Waits until the leader exits. */
  readonly await: Effect.Effect<ExitStatus>
  readonly isRunning: Effect.Effect<boolean>
  /** Runs the escalation and returns how the leader ended. */
  readonly stop: Effect.Effect<ExitStatus>
  /** Sends a signal to the whole process group. ESRCH is ignored. */
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<void>
  /** The last 8 KB of stderr so far. */
  readonly stderrTail: Effect.Effect<string>
}

// ---------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------

/**
 * @since 0.0.0
 */
export class ProcessHost extends Context.Tag("@skein/kernel/ProcessHost")<ProcessHost, {
  /**
   * Starts a child in its own process group. Closing the Scope runs `stop`,
   * then SIGKILLs the group, then drops the child from the journal.
   */
  readonly spawn: (options: SpawnOptions) => Effect.Effect<ChildProcess, SpawnError, Scope.Scope>
}>() {}

/**
 * @since 0.0.0
 */
export interface MakeOptions {
  /** Defaults for every child; each spawn may override them. */
  readonly stopTimeouts?: Partial<StopTimeouts> | undefined
  /** Reap orphans of dead runtimes from the journal first. Default true. */
  readonly reap?: boolean | undefined
}

/**
 * Reaps the journal's orphans (unless `reap: false`), then serves spawns that
 * the journal records. Its scope holds the sweeper that the releases of
 * children share.
 *
 * @since 0.0.0
 */
export const make = (
  options?: MakeOptions
): Effect.Effect<ProcessHost["Type"], never, ProcessJournal.ProcessJournal | Scope.Scope> => internal.make(options)

/**
 * @since 0.0.0
 */
export const layer = (options?: MakeOptions): Layer.Layer<ProcessHost, never, ProcessJournal.ProcessJournal> =>
  Layer.scoped(ProcessHost, make(options))

/**
 * ProcessHost over a journal file at `journal`; provides both services.
 *
 * @since 0.0.0
 */
export const layerJournal = (
  options: MakeOptions & { readonly journal: string }
): Layer.Layer<ProcessHost | ProcessJournal.ProcessJournal, never, FileSystem | Path> =>
  layer(options).pipe(Layer.provideMerge(ProcessJournal.layer({ path: options.journal })))

/**
 * ProcessHost with an in-memory journal: no orphan reaping across restarts.
 *
 * @since 0.0.0
 */
export const layerMemory = (
  options?: MakeOptions
): Layer.Layer<ProcessHost | ProcessJournal.ProcessJournal> =>
  layer(options).pipe(Layer.provideMerge(ProcessJournal.layerMemory))

/**
 * Spawns with the ProcessHost in context.
 *
 * @since 0.0.0
 */
export const spawn = (
  options: SpawnOptions
): Effect.Effect<ChildProcess, SpawnError, ProcessHost | Scope.Scope> =>
  Effect.flatMap(ProcessHost, (host) => host.spawn(options))
