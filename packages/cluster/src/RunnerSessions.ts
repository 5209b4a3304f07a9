/**
 * A runner's own sessions: serve's in-process registry, with this runner's
 * config dir (its disk) and the shared catalog to find sessions created
 * through another runner. The session entities hosted here delegate to it.
 *
 * @since 0.1.0
 */
import { SessionRegistry } from "@skein/serve"
import { SessionCatalog } from "@skein/sql"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Crypto from "node:crypto"
import * as Os from "node:os"

/**
 * @since 0.1.0
 */
export class RunnerSessions extends Context.Tag("@skein/cluster/RunnerSessions")<RunnerSessions, {
  readonly registry: SessionRegistry.SessionRegistry["Type"]
  /** The CLIs' config root on this runner: transcripts are restored here. */
  readonly configDir: string
  /** This runner's name in the turn ledger: its host and an incarnation. */
  readonly runner: string
}>() {}

/**
 * A session the shared catalog knows, as the in-process registry adopts it.
 *
 * @since 0.1.0
 */
export const fromCatalog = (catalog: SessionCatalog.SessionCatalog["Type"]) => (sessionID: string) =>
  catalog.get(sessionID).pipe(
    Effect.map((entry) =>
      Option.map(Option.fromNullable(entry), SessionRegistry.knownOfEntry)
    ),
    Effect.catchAll((error) => Effect.as(Effect.logWarning("the shared session catalog failed", error), Option.none()))
  )

/**
 * @since 0.1.0
 */
export const make = Effect.fn("RunnerSessions.make")(function*(options: SessionRegistry.Options) {
  const catalog = yield* SessionCatalog.SessionCatalog
  const registry = yield* SessionRegistry.make({ ...options, known: fromCatalog(catalog) })
  return RunnerSessions.of({
    registry,
    configDir: options.configDir,
    runner: `${Os.hostname()}/${process.pid}/${Crypto.randomBytes(4).toString("hex")}`
  })
})

/**
 * @since 0.1.0
 */
export const layer = (options: SessionRegistry.Options) => Layer.scoped(RunnerSessions, make(options))
