/**
 * Writing to a child's stdin: a write waits for `drain` when the pipe is
 * full, and fails with StdinClosed once stdin was closed (by the host, by
 * the child's exit, or by a broken pipe) instead of throwing or hanging.
 */
import { Effect } from "effect"
import type * as ProcessHost from "../ProcessHost.js"
import * as Errors from "../ProcessHost.js"
import type { ChildPipes } from "./childPipes.js"
import type { NodeChild } from "./childStart.js"

export interface ChildStdin {
  readonly write: (data: Uint8Array | string) => Effect.Effect<void, ProcessHost.StdinClosed>
  /** Ends stdin; idempotent. */
  readonly closeStdin: Effect.Effect<void>
}

export const make = (node: NodeChild, pid: number, pipes: ChildPipes): ChildStdin => {
  const closeStdin = Effect.sync(() => {
    pipes.closeStdinFor("stdin closed by the host")
    if (!node.stdin.writableEnded && !node.stdin.destroyed) node.stdin.end()
  })

  const write = (data: Uint8Array | string) =>
    Effect.async<void, ProcessHost.StdinClosed>((resume) => {
      const closed = (reason: string) => resume(Effect.fail(new Errors.StdinClosed({ pid, reason })))
      const already = pipes.stdinClosed()
      if (already !== undefined) return closed(already)
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
        closed(pipes.stdinClosed() ?? "stdin closed")
      }
      node.stdin.on("drain", onDrain)
      node.stdin.on("close", onClose)
      node.stdin.on("error", onClose)
      return Effect.sync(cleanup)
    })

  return { write, closeStdin }
}
