/**
 * Where the session store lives, as `--store` names it: `sqlite:<file>` (one
 * file, relative paths from the current directory) or `postgres://…`
 * (`postgresql://` too). The Postgres URL stays `Redacted` from the moment
 * it is parsed, so no log or error prints its password.
 *
 * @since 0.0.0
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Path from "node:path"
import { BadStoreUrl } from "./SqlStoreError.js"

/**
 * @since 0.0.0
 */
export type StoreUrl =
  | { readonly _tag: "Sqlite"; readonly filename: string }
  | { readonly _tag: "Postgres"; readonly url: Redacted.Redacted<string> }

/**
 * @since 0.0.0
 */
export const parse = (input: string): Effect.Effect<StoreUrl, BadStoreUrl> => {
  if (input.startsWith("sqlite:")) {
    const file = input.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "")
    return file.length === 0
      ? Effect.fail(new BadStoreUrl({ input }))
      : Effect.succeed({ _tag: "Sqlite", filename: Path.resolve(file) })
  }
  if (/^postgres(ql)?:\/\/./.test(input)) return Effect.succeed({ _tag: "Postgres", url: Redacted.make(input) })
  return Effect.fail(new BadStoreUrl({ input: input.replace(/:[^:@/]*@/, ":***@") }))
}

/** The URL as errors and logs show it (password masked). */
export const display = (url: StoreUrl): Redacted.Redacted<string> =>
  url._tag === "Sqlite" ? Redacted.make(`sqlite:${url.filename}`) : url.url
