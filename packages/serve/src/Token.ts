/**
 * The server's token: `SKEIN_SERVER_TOKEN` when set, otherwise one generated
 * at start and stored 0600 under the state folder (so a client on the same
 * machine and account can read it). A bind beyond loopback needs a token
 * given explicitly: a generated one is meant for local clients only.
 *
 * The token stays `Redacted` from here on: it is never logged or printed by
 * accident, and a given one is never printed at all (its owner has it).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import * as Path from "node:path"

export class TokenRequired extends Schema.TaggedError<TokenRequired>()("TokenRequired", { hostname: Schema.String }) {
  override get message() {
    return `refusing to listen on ${this.hostname} without SKEIN_SERVER_TOKEN: a non-loopback bind needs an explicit token`
  }
}

export const isLoopback = (hostname: string) => hostname === "127.0.0.1" || hostname === "::1" || hostname === "localhost"

export interface Resolved {
  readonly token: Redacted.Redacted<string>
  /** Where a generated token was stored; undefined when it came from the environment or options. */
  readonly file: string | undefined
}

export const resolve = Effect.fn("Token.resolve")(function*(options: {
  readonly hostname: string
  readonly stateDir: string
  readonly token?: string | undefined
}) {
  const given = options.token ?? process.env.SKEIN_SERVER_TOKEN
  if (given !== undefined && given !== "") return { token: Redacted.make(given), file: undefined } satisfies Resolved
  if (!isLoopback(options.hostname)) return yield* new TokenRequired({ hostname: options.hostname })
  const fs = yield* FileSystem.FileSystem
  const token = Crypto.randomBytes(24).toString("base64url")
  const file = Path.join(options.stateDir, "token")
  yield* fs.makeDirectory(options.stateDir, { recursive: true, mode: 0o700 })
  // Written whole or not at all: a client reading the file never sees half a token.
  const temporary = `${file}.${Crypto.randomBytes(6).toString("hex")}.tmp`
  yield* fs.writeFileString(temporary, token + "\n", { mode: 0o600 }).pipe(
    Effect.zipRight(fs.chmod(temporary, 0o600)),
    Effect.zipRight(fs.rename(temporary, file)),
    Effect.onError(() => Effect.ignore(fs.remove(temporary)))
  )
  return { token: Redacted.make(token), file } satisfies Resolved
})
