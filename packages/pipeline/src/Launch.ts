/**
 * How every session of a run is started: the CLI, its environment, config
 * folder and working directory. A stage adds its own options (model, tools,
 * system prompt, …) on top. The permission, hook and toolkit services in
 * context where a run starts reach every session, as with `Session.start`.
 */
import type { Session } from "@skein/session"
import { Context, Layer } from "effect"

export class Launch extends Context.Tag("@skein/pipeline/Launch")<Launch, Session.SessionOptions>() {}

export const layer = (options: Session.SessionOptions): Layer.Layer<Launch> => Layer.succeed(Launch, options)
