/**
 * The ProcessHost service: spawns a child under a marker unique to it,
 * journals it, and ties its lifetime to the spawn's scope. The parts live
 * beside it: starting (`childStart`), pipes and exit (`childPipes`), stdin
 * (`childStdin`), and stopping and release (`childStop`).
 */
import { Clock, Deferred, Duration, Effect, Option, Scope, Stream } from "effect"
import type * as ProcessHost from "../ProcessHost.js"
import * as Errors from "../ProcessHost.js"
import { ProcessJournal } from "../ProcessJournal.js"
import * as Batcher from "./batcher.js"
import * as ChildPipes from "./childPipes.js"
import { start } from "./childStart.js"
import * as ChildStdin from "./childStdin.js"
import * as ChildStdout from "./childStdout.js"
import * as ChildStop from "./childStop.js"
import * as Marker from "./marker.js"
import * as PidWindow from "./pidWindow.js"
import * as procfs from "./procfs.js"

type KillMarked = (marker: string) => Effect.Effect<ReadonlyArray<number>>

/** A child's marker, and where its descendants start when that is known (see pidWindow.ts). */
interface Marked {
  readonly marker: string
  readonly origin: Option.Option<PidWindow.Origin>
}

/** One sweep for a batch: within the origins' window when every child has one, else over every process. */
const killBatch = (batch: ReadonlyArray<Marked>): Effect.Effect<ReadonlyArray<ReadonlyArray<number>>> => {
  const origins = Option.all(batch.map((m) => m.origin))
  return Effect.map(
    Marker.killAll(new Set(batch.map((m) => m.marker)), { origins: Option.getOrUndefined(origins) }),
    (killed) => batch.map((m) => killed.get(m.marker) ?? [])
  )
}

/**
 * How long a sweep waits for the other releases under way to ask for theirs.
 * The children of one scope close exit within milliseconds of each other
 * once signalled; a child still in its grace period holds the others up no
 * longer than this.
 */
const gatherWait = Duration.millis(50)

/**
 * One /proc sweep for the children that end together. A release is under
 * way from its start until it asks for its sweep; a sweep waits for those
 * under way (up to `gatherWait`), so a scope close that ends many children
 * sweeps once, and then rewrites the journal once.
 */
const makeSweeper = Effect.gen(function*() {
  let underway = 0
  const allAsked = yield* Effect.makeLatch(true)
  const batcher = yield* Batcher.make(
    killBatch,
    // Real time, whatever clock the caller runs on: it waits on the kernel.
    // With no other release under way there is no one to wait for, and no timer to set.
    {
      gather: Effect.suspend(() =>
        underway === 0 ? Effect.void : allAsked.await.pipe(Effect.timeout(gatherWait), Effect.ignore, Effect.withClock(Clock.make()))
      )
    }
  )
  /** Runs a release as under way; the sweep it asks for is batched. */
  const releasing = (
    origin: Option.Option<PidWindow.Origin>,
    release: (killMarked: KillMarked) => Effect.Effect<void>
  ): Effect.Effect<void> =>
    Effect.suspend(() => {
      let asked = false
      const ask = Effect.sync(() => {
        if (asked) return
        asked = true
        if (--underway === 0) allAsked.unsafeOpen()
      })
      if (underway++ === 0) allAsked.unsafeClose()
      return release((marker) => Effect.zipRight(ask, batcher.submit({ marker, origin }))).pipe(Effect.ensuring(ask))
    })
  return { releasing }
})

/** Starts the child and builds its handle; `release` ends it. */
const acquire = (
  journal: ProcessJournal["Type"],
  spawnOptions: ProcessHost.SpawnOptions,
  args: ReadonlyArray<string>,
  marker: string,
  timeouts: ChildStop.Timeouts
) =>
  Effect.gen(function*() {
    const pipes = yield* ChildPipes.make
    // Read before the child starts: a lower bound of the count at its start.
    const forks = PidWindow.forksBefore()
    const started = yield* start(spawnOptions, args, journal.source, pipes.wire)
    const node = started.node
    const pid = node.pid!
    const origin = Option.map(forks, (forks): PidWindow.Origin => ({ pid, forks }))

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

    const kill = ChildStop.killGroup(pid)
    const { closeStdin, write } = ChildStdin.make(node, pid, pipes)
    const stopOptions: ChildStop.StopOptions = { pid, exited: pipes.exited, closeStdin, kill, timeouts }
    const stop = ChildStop.makeStop(stopOptions)

    // One reader of the pipe: the stream is the pull, repeated; a reader that stops
    // early closes the pipe (the child's next write fails), as a Node stream's would.
    const pullStdout = ChildStdout.pull(node.stdout, (error) => Effect.logWarning(`ProcessHost: stdout of ${pid} failed: ${error.message}`))
    const child: ProcessHost.ChildProcess = {
      pid,
      pgid: pid,
      marker,
      command: spawnOptions.command,
      args,
      stdout: Stream.repeatEffectChunkOption(pullStdout).pipe(
        Stream.ensuring(Effect.sync(() => {
          if (!node.stdout.closed) node.stdout.destroy()
        }))
      ),
      pullStdout,
      stderr: pipes.stderr,
      write,
      closeStdin,
      await: Deferred.await(pipes.exited),
      isRunning: Effect.map(Deferred.isDone(pipes.exited), (done) => !done),
      stop,
      kill,
      stderrTail: Effect.sync(pipes.stderrTail)
    }

    const release = (killMarked: KillMarked) =>
      ChildStop.release({
        pid,
        marker,
        identity,
        node,
        stop: ChildStop.makeReleaseStop(stopOptions),
        kill,
        journal,
        killMarked
      })
    return { child, origin, release }
  })

export const make = Effect.fnUntraced(function*(options?: ProcessHost.MakeOptions) {
  const journal = yield* ProcessJournal
  const runtimeId = Marker.makeRuntimeId()
  let spawned = 0
  if (options?.reap !== false) yield* journal.reap
  const sweeper = yield* makeSweeper

  const spawn = Effect.fn("ProcessHost.spawn")(function*(requested: ProcessHost.SpawnOptions) {
    // Inherited by all the child starts, setsid'd escapees included (see marker.ts).
    const marker = `${runtimeId}.${++spawned}`
    const spawnOptions: ProcessHost.SpawnOptions = {
      ...requested,
      env: { ...requested.env, [Marker.variable]: Marker.chain(process.env[Marker.variable], marker) }
    }
    const args = [...(spawnOptions.args ?? [])]
    const timeouts = ChildStop.resolveTimeouts(options?.stopTimeouts, spawnOptions.stopTimeouts)
    yield* Effect.annotateCurrentSpan({ command: spawnOptions.command, label: spawnOptions.label ?? "" })

    // `acquireRelease` would restore the spawn's FiberRefs around the release,
    // a diff of every FiberRef when the scope closes; the release needs none
    // of them, and a scope close that ends many children pays it before each
    // child's signal.
    const scope = yield* Effect.scope
    const { child } = yield* Effect.uninterruptible(Effect.tap(
      acquire(journal, spawnOptions, args, marker, timeouts),
      ({ origin, release }) => Scope.addFinalizer(scope, sweeper.releasing(origin, release))
    ))
    return child
  })

  return Errors.ProcessHost.of({ spawn })
})
