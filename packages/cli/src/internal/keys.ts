/**
 * One keystroke from a terminal's stdin, in raw mode for just that key.
 * It reads through `readable`/`read()`, as the chat's line reader does, so
 * the two never compete for the same bytes: the line reader is not pulling
 * while a turn (and so a permission prompt) runs.
 */
import { Effect } from "effect"

/** Waits for the next key pressed; Ctrl-C comes back as "\x03" (raw mode turns off the signal). */
export const next: Effect.Effect<string> = Effect.async<string>((resume) => {
  const stdin = process.stdin
  const raw = stdin.isRaw
  stdin.setRawMode(true)
  const cleanup = () => {
    stdin.off("readable", onReadable)
    stdin.setRawMode(raw)
  }
  function onReadable() {
    const chunk: unknown = stdin.read()
    if (chunk === null) return
    cleanup()
    resume(Effect.succeed(Buffer.isBuffer(chunk) ? chunk.toString("utf8") : String(chunk)))
  }
  stdin.on("readable", onReadable)
  onReadable()
  return Effect.sync(cleanup)
})

/** Whether a person is at the terminal: both stdin and stderr are TTYs. */
export const interactive = (): boolean => process.stdin.isTTY === true && process.stderr.isTTY === true
