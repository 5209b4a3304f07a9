import * as NodeStream from "@effect/platform-node/NodeStream"
import { Deferred, Duration, Effect, Exit, Mailbox, Option, Stream } from "effect"
import * as NodeChildProcess from "node:child_process"
import type { Readable, Writable } from "node:stream"
import type * as ProcessHost from "../ProcessHost.js"
import * as Errors from "../ProcessHost.js"
import { ProcessJournal } from "../ProcessJournal.js"
import * as Marker from "./marker.js"
import * as procfs from "./procfs.js"

/** Bytes of stderr kept for ExitStatus. */
export const stderrTailBytes = 8 * 1024

/** Unread stderr chunks kept before the oldest are dropped. */
const stderrBacklog = 1024

/** How long to wait for stderr to drain after the leader exits. */
const stderrFlushMillis = 100

/** After the final SIGKILL, how long a leader may take to report its exit. */
const killWait = Duration.seconds(10)

/** The last `capacity` bytes written to it. */
export class ByteRing {
  private readonly buffer: Uint8Array
  private start = 0
  private length = 0
  constructor(readonly capacity: number) {
    this.buffer = new Uint8Array(capacity)
  }
  push(bytes: Uint8Array): void {
    const src = bytes.length > this.capacity ? bytes.subarray(bytes.length - this.capacity) : bytes
    for (let i = 0; i < src.length; i++) {
      this.buffer[(this.start + this.length) % this.capacity] = src[i]!
      if (this.length < this.capacity) this.length++
      else this.start = (this.start + 1) % this.capacity
    }
  }
  bytes(): Uint8Array {
    const out = new Uint8Array(this.length)
    for (let i = 0; i < this.length; i++) out[i] = this.buffer[(this.start + i) % this.capacity]!
    return out
  }
  /** UTF-8 text, without a character the cut at the front split. */
  text(): string {
    const bytes = this.bytes()
    let from = 0
    if (this.length === this.capacity) {
      while (from < bytes.length && from < 4 && (bytes[from]! & 0xc0) === 0x80) from++
    }
    return new TextDecoder().decode(bytes.subarray(from))
  }
}

const resolveTimeouts = (
  ...layers: ReadonlyArray<Partial<ProcessHost.StopTimeouts> | undefined>
): { readonly stdinGrace: Duration.Duration; readonly termGrace: Duration.Duration } => {
  let stdinGrace = Duration.decode(Errors.defaultStopTimeouts.stdinGrace)
  let termGrace = Duration.decode(Errors.defaultStopTimeouts.termGrace)
  for (const layer of layers) {
    if (layer?.stdinGrace !== undefined) stdinGrace = Duration.decode(layer.stdinGrace)
    if (layer?.termGrace !== undefined) termGrace = Duration.decode(layer.termGrace)
  }
  return { stdinGrace, termGrace }
}

const buildEnv = (options: ProcessHost.SpawnOptions): NodeJS.ProcessEnv => {
  const base: NodeJS.ProcessEnv = options.envMode === "replace" ? {} : { ...process.env }
  for (const [name, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete base[name]
    else base[name] = value
  }
  return base
}

/** Starts the program; resolves once Node reports `spawn` or `error`. */
const start = (
  options: ProcessHost.SpawnOptions,
  args: ReadonlyArray<string>,
  source: procfs.IdentitySource,
  wire: (child: NodeChildProcess.ChildProcessByStdio<Writable, Readable, Readable>) => void
): Effect.Effect<
  {
    readonly node: NodeChildProcess.ChildProcessByStdio<Writable, Readable, Readable>
    readonly identity: Option.Option<procfs.Identity>
  },
  ProcessHost.SpawnError
> =>
  Effect.async((resume) => {
    const failWith = (error: unknown) =>
      resume(Effect.fail(
        new Errors.SpawnError({
          command: options.command,
          args,
          ...(procfs.errnoCode(error) !== undefined ? { code: procfs.errnoCode(error)! } : {}),
          reason: error instanceof Error ? error.message : String(error)
        })
      ))
    let child: NodeChildProcess.ChildProcessByStdio<Writable, Readable, Readable>
    try {
      child = NodeChildProcess.spawn(options.command, args, {
        cwd: options.cwd,
        env: buildEnv(options),
        stdio: ["pipe", "pipe", "pipe"],
        detached: true,
        shell: false,
        windowsHide: true
      })
    } catch (error) {
      failWith(error)
      return
    }
    // Now, before the event loop runs: a child that exits at once must still
    // be journaled (a shell that leaves background jobs behind), and its exit
    // and output must not be emitted before anyone listens.
    if (child.pid !== undefined) wire(child)
    const identity = source === "proc" && child.pid !== undefined
      ? procfs.snapshotProc(child.pid, [options.command, ...args])
      : Option.none()
    const onSpawn = () => {
      child.off("error", onError)
      resume(Effect.succeed({ node: child, identity }))
    }
    const onError = (error: unknown) => {
      child.off("spawn", onSpawn)
      failWith(error)
    }
    child.once("spawn", onSpawn)
    child.once("error", onError)
  })

export const make = Effect.fnUntraced(function*(options?: ProcessHost.MakeOptions) {
  const journal = yield* ProcessJournal
  const runtimeId = Marker.makeRuntimeId()
  let spawned = 0
  if (options?.reap !== false) yield* journal.reap

  const spawn = Effect.fn("ProcessHost.spawn")(function*(requested: ProcessHost.SpawnOptions) {
    // Inherited by all the child starts, setsid'd escapees included (see marker.ts).
    const marker = `${runtimeId}.${++spawned}`
    const spawnOptions: ProcessHost.SpawnOptions = {
      ...requested,
      env: { ...requested.env, [Marker.variable]: Marker.chain(process.env[Marker.variable], marker) }
    }
    const args = [...(spawnOptions.args ?? [])]
    const timeouts = resolveTimeouts(options?.stopTimeouts, spawnOptions.stopTimeouts)
    yield* Effect.annotateCurrentSpan({ command: spawnOptions.command, label: spawnOptions.label ?? "" })

    const acquire = Effect.gen(function*() {
      const exited = yield* Deferred.make<ProcessHost.ExitStatus>()
      const stderrMailbox = yield* Mailbox.make<Uint8Array>({ capacity: stderrBacklog, strategy: "sliding" })
      const ring = new ByteRing(stderrTailBytes)
      let stdinClosed: string | undefined
      let stderrEnded = false
      const stderrEndWaiters: Array<() => void> = []

      const onStderrEnd = () => {
        if (stderrEnded) return
        stderrEnded = true
        stderrMailbox.unsafeDone(Exit.void)
        for (const wake of stderrEndWaiters.splice(0)) wake()
      }
      const wire = (node: NodeChildProcess.ChildProcessByStdio<Writable, Readable, Readable>) => {
        node.stderr.on("data", (chunk: Buffer) => {
          const bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)
          ring.push(bytes)
          stderrMailbox.unsafeOffer(bytes)
        })
        node.stderr.on("end", onStderrEnd)
        node.stderr.on("close", onStderrEnd)
        node.stderr.on("error", onStderrEnd)
        // Errors surface through the stream reading stdout; without a listener they would crash.
        node.stdout.on("error", () => {})
        // When the child exits, Node resumes its unread stdio and drops the bytes.
        // A 'readable' listener keeps stdout paused (and buffered) for the
        // caller, who may start reading after the exit.
        node.stdout.on("readable", () => {})
        node.stdin.on("error", (error) => {
          stdinClosed ??= `stdin failed: ${procfs.errnoCode(error) ?? error.message}`
        })
        node.stdin.on("close", () => {
          stdinClosed ??= "stdin closed"
        })
        node.once("exit", (code, signal) => {
          stdinClosed ??= "process exited"
          const finish = () =>
            Deferred.unsafeDone(exited, Exit.succeed({ code, signal, stderrTail: ring.text() }))
          // stderr may still hold the last bytes; a grandchild holding the pipe must not delay us.
          if (stderrEnded) return finish()
          const timer = setTimeout(finish, stderrFlushMillis)
          stderrEndWaiters.push(() => {
            clearTimeout(timer)
            finish()
          })
        })
      }

      const started = yield* start(spawnOptions, args, journal.source, wire)
      const node = started.node
      const pid = node.pid!

      const identity = journal.source === "proc" ? started.identity : yield* procfs.identify("ps", pid)
      if (Option.isSome(identity)) {
        yield* journal.record({
          pid,
          pgid: pid,
          identity: identity.value,
          command: spawnOptions.command,
          label: spawnOptions.label,
          marker
        })
      }

      const kill = (signal: NodeJS.Signals) =>
        Effect.suspend(() => {
          const failure = procfs.killGroup(pid, signal)
          return failure === undefined
            ? Effect.void
            : Effect.logWarning(`ProcessHost: ${signal} to group ${pid} failed: ${failure}`)
        })

      const closeStdin = Effect.sync(() => {
        stdinClosed ??= "stdin closed by the host"
        if (!node.stdin.writableEnded && !node.stdin.destroyed) node.stdin.end()
      })

      const write = (data: Uint8Array | string) =>
        Effect.async<void, ProcessHost.StdinClosed>((resume) => {
          const closed = (reason: string) => resume(Effect.fail(new Errors.StdinClosed({ pid, reason })))
          if (stdinClosed !== undefined) return closed(stdinClosed)
          if (node.stdin.destroyed || node.stdin.writableEnded) return closed("stdin closed")
          if (node.stdin.write(data)) return resume(Effect.void)
          const cleanup = () => {
            node.stdin.off("drain", onDrain)
            node.stdin.off("close", onClose)
            node.stdin.off("error", onClose)
          }
          const onDrain = () => {
            cleanup()
            resume(Effect.void)
          }
          const onClose = () => {
            cleanup()
            closed(stdinClosed ?? "stdin closed")
          }
          node.stdin.on("drain", onDrain)
          node.stdin.on("close", onClose)
          node.stdin.on("error", onClose)
          return Effect.sync(cleanup)
        })

      const awaitExit = Deferred.await(exited)
      // Interruptible: the stop also runs inside the (uninterruptible) scope
      // finalizer, where a timeout could not otherwise cut the wait short.
      const waitFor = (grace: Duration.Duration): Effect.Effect<Option.Option<ProcessHost.ExitStatus>> =>
        Duration.isZero(grace)
          ? Effect.flatMap(Deferred.isDone(exited), (done) => done ? Effect.asSome(awaitExit) : Effect.succeedNone)
          : Effect.timeoutOption(Effect.interruptible(awaitExit), grace)

      const stop = Effect.gen(function*() {
        yield* closeStdin
        const afterStdin = yield* waitFor(timeouts.stdinGrace)
        if (Option.isSome(afterStdin)) return afterStdin.value
        yield* kill("SIGTERM")
        const afterTerm = yield* waitFor(timeouts.termGrace)
        if (Option.isSome(afterTerm)) return afterTerm.value
        yield* kill("SIGKILL")
        return yield* awaitExit
      }).pipe(Effect.withSpan("ProcessHost.stop", { attributes: { pid } }))

      const child: ProcessHost.ChildProcess = {
        pid,
        pgid: pid,
        marker,
        command: spawnOptions.command,
        args,
        stdout: NodeStream.fromReadable<Error, Uint8Array>(
          () => node.stdout,
          (error) => error instanceof Error ? error : new Error(String(error))
        ).pipe(
          Stream.catchAll((error) =>
            Stream.execute(Effect.logWarning(`ProcessHost: stdout of ${pid} failed: ${error.message}`))
          )
        ),
        stderr: Mailbox.toStream(stderrMailbox),
        write,
        closeStdin,
        await: awaitExit,
        isRunning: Effect.map(Deferred.isDone(exited), (done) => !done),
        stop,
        kill,
        stderrTail: Effect.sync(() => ring.text())
      }

      const release = Effect.gen(function*() {
        const ended = yield* Effect.interruptible(stop).pipe(Effect.timeoutOption(Duration.sum(
          Duration.sum(timeouts.stdinGrace, timeouts.termGrace),
          killWait
        )))
        if (Option.isNone(ended)) {
          yield* Effect.logWarning(`ProcessHost: process ${pid} did not exit after SIGKILL`)
        }
        // Always: the leader exiting says nothing about its background children.
        // The leader is reaped by now, so once the group empties its id may be
        // recycled by a new leader with the same pid: spare a pid that runs
        // another program.
        // The start time alone decides: the leader may have exec'd another program.
        const recycled = Option.isSome(identity) &&
          Option.exists(yield* procfs.identify(identity.value.source, pid), (now) =>
            now.startTime !== identity.value.startTime)
        if (!recycled) yield* kill("SIGKILL")
        // Then whatever left the group (setsid) but still carries the marker.
        const escapees = yield* Marker.killAll(marker)
        if (escapees.length > 0) {
          yield* Effect.logDebug(`ProcessHost: killed ${escapees.length} escaped descendant(s) of ${pid}`)
        }
        node.stdout.destroy()
        node.stderr.destroy()
        node.stdin.destroy()
        yield* journal.remove(pid)
      })

      return { child, release }
    })

    const { child } = yield* Effect.acquireRelease(acquire, ({ release }) => release)
    return child
  })

  return Errors.ProcessHost.of({ spawn })
})
