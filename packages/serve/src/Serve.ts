/**
 * The whole server as one layer: the event log, the permission broker, the
 * in-process session registry and the HTTP routes, over any `HttpServer`.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { Session } from "@skein/session"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Path from "node:path"
import * as PermissionBroker from "./PermissionBroker.js"
import * as Server from "./Server.js"
import * as ServerEvents from "./ServerEvents.js"
import * as SessionRegistry from "./SessionRegistry.js"

export interface Options {
  /** Kept `Redacted` inside the server; a string is wrapped. */
  readonly token: string | Redacted.Redacted<string>
  /** Folders sessions may run in; the first is the default `directory`. */
  readonly roots: ReadonlyArray<string>
  /** The CLIs' `CLAUDE_CONFIG_DIR` (transcripts). */
  readonly configDir: string
  /** The server's own state: the event log, the token. */
  readonly stateDir: string
  readonly origins?: ReadonlyArray<string> | undefined
  /** Names the server answers to in `Host` besides the loopback ones (see `Server.Options.hosts`). */
  readonly hosts?: ReadonlyArray<string> | undefined
  /** Options every CLI gets (env, executable, bare, …). */
  readonly session?: Partial<Session.SessionOptions> | undefined
  /** Deny a permission ask (or withdraw a question) no client answers after this long. Default 5 minutes. */
  readonly permissionTimeout?: Duration.DurationInput | undefined
  /** Stop a live session after this long with no turn running or queued (its transcript stays). Default 10 minutes. */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /** Stop a session whose CLI says nothing this long during a turn. Default 15 minutes (`SessionRegistry.defaultSilenceTimeout`). */
  readonly silenceTimeout?: Duration.DurationInput | undefined
  readonly heartbeat?: Duration.DurationInput | undefined
  readonly maxLag?: number | undefined
  readonly legacy?: boolean | undefined
}

export const layer = (options: Options) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    // Roots as physical paths: `directory` is compared after its own realpath.
    const roots = yield* Effect.forEach(options.roots, (root) => fs.realPath(root))
    const base = Layer.mergeAll(
      ServerEvents.layer({ dir: Path.join(options.stateDir, "events") }),
      PermissionBroker.layer({ timeout: options.permissionTimeout })
    )
    const registry = SessionRegistry.layer({
      configDir: options.configDir,
      roots,
      session: options.session,
      legacy: options.legacy,
      idleTimeout: options.idleTimeout,
      silenceTimeout: options.silenceTimeout,
      questionTimeout: options.permissionTimeout
    })
    return Server.layer({
      token: Redacted.isRedacted(options.token) ? options.token : Redacted.make(options.token),
      roots,
      origins: options.origins,
      hosts: options.hosts,
      stateDir: options.stateDir,
      configDir: options.configDir,
      heartbeat: options.heartbeat,
      maxLag: options.maxLag
    }).pipe(Layer.provideMerge(registry), Layer.provideMerge(base))
  }))
