/**
 * The `skein` executable. Unlike NodeRuntime.runMain, SIGINT is left to the
 * command (CtrlC: the first press interrupts a turn); SIGTERM interrupts it.
 * Every scope closes before the process exits, so the CLI processes a
 * session started are stopped first. Everything runs on the kernel's
 * SlicedScheduler, as `Skein.layer` does for an embedding service.
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost, SlicedScheduler } from "@skein/kernel"
import { Effect, Exit, Layer } from "effect"
import * as CtrlC from "./CtrlC.js"
import * as Skein from "./Skein.js"

const program = Skein.main(process.argv).pipe(
  Effect.provide(Layer.mergeAll(NodeContext.layer, ProcessHost.layerMemory(), CtrlC.layer, SlicedScheduler.layer()))
)

// Waiting on a Deferred alone holds no handle; this keeps Node up until the command ends.
const keepAlive = setInterval(() => {}, 2 ** 31 - 1)
const fiber = Effect.runFork(program)
const onSigterm = () => fiber.unsafeInterruptAsFork(fiber.id())
process.once("SIGTERM", onSigterm)
// A reader that went away (`skein … | head`) ends the command the same way, never with an uncaught EPIPE.
for (const stream of [process.stdout, process.stderr]) stream.on("error", onSigterm)
fiber.addObserver((exit) => {
  process.removeListener("SIGTERM", onSigterm)
  clearInterval(keepAlive)
  process.exit(Exit.isSuccess(exit) ? exit.value : Exit.isInterrupted(exit) ? 143 : 1)
})
