/**
 * A child's pipes and exit as the host observes them: stderr read eagerly
 * into a ring (for the exit status) and a sliding mailbox (for a reader);
 * stdout kept paused and buffered until someone reads it; why stdin stopped
 * taking writes; and the exit, reported once stderr drained or shortly after.
 */
import { Deferred, Effect, Exit, Mailbox, type Stream } from "effect"
import type * as ProcessHost from "../ProcessHost.js"
import { ByteRing } from "./byteRing.js"
import type { NodeChild } from "./childStart.js"
import * as procfs from "./procfs.js"

/** Bytes of stderr kept for ExitStatus. */
export const stderrTailBytes = 8 * 1024

/** Unread stderr chunks kept before the oldest are dropped. */
const stderrBacklog = 1024

/** How long to wait for stderr to drain after the leader exits. */
const stderrFlushMillis = 100

export interface ChildPipes {
  /** Completed when the leader exits (and stderr drained, or `stderrFlushMillis` passed). */
  readonly exited: Deferred.Deferred<ProcessHost.ExitStatus>
  readonly stderr: Stream.Stream<Uint8Array>
  readonly stderrTail: () => string
  /** Why stdin no longer takes writes; undefined while it does. */
  readonly stdinClosed: () => string | undefined
  /** Records why stdin closed, unless a reason is known already. */
  readonly closeStdinFor: (reason: string) => void
  /** Attaches the listeners; call it before the event loop runs again after the spawn. */
  readonly wire: (node: NodeChild) => void
}

export const make: Effect.Effect<ChildPipes> = Effect.gen(function*() {
  const exited = yield* Deferred.make<ProcessHost.ExitStatus>()
  const stderrMailbox = yield* Mailbox.make<Uint8Array>({ capacity: stderrBacklog, strategy: "sliding" })
  const ring = new ByteRing(stderrTailBytes)
  let stdinClosed: string | undefined
  let stderrEnded = false
  const stderrEndWaiters: Array<() => void> = []

  const closeStdinFor = (reason: string) => {
    stdinClosed ??= reason
  }
  const onStderrEnd = () => {
    if (stderrEnded) return
    stderrEnded = true
    stderrMailbox.unsafeDone(Exit.void)
    for (const wake of stderrEndWaiters.splice(0)) wake()
  }
  const wire = (node: NodeChild) => {
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
    node.stdin.on("error", (error) => closeStdinFor(`stdin failed: ${procfs.errnoCode(error) ?? error.message}`))
    node.stdin.on("close", () => closeStdinFor("stdin closed"))
    node.once("exit", (code, signal) => {
      closeStdinFor("process exited")
      const finish = () => Deferred.unsafeDone(exited, Exit.succeed({ code, signal, stderrTail: ring.text() }))
      // stderr may still hold the last bytes; a grandchild holding the pipe must not delay us.
      if (stderrEnded) return finish()
      const timer = setTimeout(finish, stderrFlushMillis)
      stderrEndWaiters.push(() => {
        clearTimeout(timer)
        finish()
      })
    })
  }

  return {
    exited,
    stderr: Mailbox.toStream(stderrMailbox),
    stderrTail: () => ring.text(),
    stdinClosed: () => stdinClosed,
    closeStdinFor,
    wire
  }
})
