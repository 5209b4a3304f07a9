/**
 * FakeModel in a process of its own that says when each request arrived:
 * the first line of stdout is its URL, then one line per `/v1/messages`
 * request, `request <epoch ms> <conversation|side>`, written as the model
 * picks its reply (the whole body has been read by then). A bench compares
 * these times with its own `performance.timeOrigin + performance.now()`:
 * both clocks are the system's, read at sub-millisecond resolution.
 * Ends with its stdin.
 *
 *   tsx bench/support/timedModelServer.ts
 */
import { NodeRuntime } from "@effect/platform-node"
import { FakeModel } from "@skein/testkit"
import { Effect } from "effect"

const fallback = FakeModel.defaultFallback
const now = () => performance.timeOrigin + performance.now()

NodeRuntime.runMain(
  Effect.scoped(Effect.gen(function*() {
    const model = yield* FakeModel.make({
      fallback: (request) => {
        process.stdout.write(`request ${now().toFixed(3)} ${FakeModel.isConversation(request) ? "conversation" : "side"}\n`)
        return typeof fallback === "function" ? fallback(request) : fallback
      }
    })
    process.stdout.write(`${model.url}\n`)
    yield* Effect.async<void>((resume) => {
      process.stdin.on("end", () => resume(Effect.void))
      process.stdin.on("close", () => resume(Effect.void))
      process.stdin.resume()
    })
  }))
)
