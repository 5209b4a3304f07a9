/**
 * FakeModel in a process of its own, for benches that measure the host's
 * CPU: the model stands in for a remote API, so its request handling is not
 * the host's work; and in the host's process its Effect code shares the
 * JIT's state with whichever contender runs, so what it cost in a window
 * depended on the contender. Prints its URL as the first line of stdout;
 * ends with its stdin.
 *
 *   tsx bench/support/fakeModelServer.ts
 */
import { NodeRuntime } from "@effect/platform-node"
import { FakeModel } from "@skein/testkit"
import { Effect } from "effect"

NodeRuntime.runMain(
  Effect.scoped(Effect.gen(function*() {
    const model = yield* FakeModel.make()
    process.stdout.write(`${model.url}\n`)
    yield* Effect.async<void>((resume) => {
      process.stdin.on("end", () => resume(Effect.void))
      process.stdin.on("close", () => resume(Effect.void))
      process.stdin.resume()
    })
  }))
)
