/**
 * ACP session ids and the CLI's. A session taken from the warm pool learns
 * its CLI id only from `init`, with its first prompt, but the client needs
 * an id at `session/new`: it gets one of skein's, and once the CLI names
 * its own, the pair is kept under `<config>/skein/acp/<id>.json`, so a
 * later `skein acp` (a `session/load` after the editor restarts) finds the
 * transcript. Any other id (a session made elsewhere, a fork) is the CLI's own.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Path from "node:path"

const Alias = Schema.Struct({ cliSessionId: Schema.String, cwd: Schema.String })
type Alias = typeof Alias.Type

const decode = Schema.decodeUnknownOption(Schema.parseJson(Alias))

export const dirOf = (configDir: string): string => Path.join(configDir, "skein", "acp")

const fileOf = (configDir: string, acpId: string) => Path.join(dirOf(configDir), `${acpId}.json`)

/** Ids are UUIDs: anything else is never a file name here. */
const isId = (id: string) => /^[0-9a-zA-Z-]{8,64}$/.test(id)

export const write = (configDir: string, acpId: string, alias: Alias) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.makeDirectory(dirOf(configDir), { recursive: true, mode: 0o700 })
    yield* fs.writeFileString(fileOf(configDir, acpId), JSON.stringify(alias), { mode: 0o600 })
  }).pipe(Effect.ignore)

/** The CLI session behind an ACP id: its alias, or the id itself. */
export const resolve = (configDir: string, acpId: string) =>
  Effect.gen(function*() {
    if (!isId(acpId)) return acpId
    const fs = yield* FileSystem.FileSystem
    const text = yield* Effect.orElseSucceed(fs.readFileString(fileOf(configDir, acpId)), () => "")
    const alias = decode(text)
    return alias._tag === "Some" ? alias.value.cliSessionId : acpId
  })

/** CLI id → ACP id, for every alias kept: a listing shows the ids the client knows. */
export const reverse = (configDir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const names = yield* Effect.orElseSucceed(fs.readDirectory(dirOf(configDir)), () => [])
    const out = new Map<string, string>()
    for (const name of names) {
      if (!name.endsWith(".json")) continue
      const text = yield* Effect.orElseSucceed(fs.readFileString(Path.join(dirOf(configDir), name)), () => "")
      const alias = decode(text)
      if (alias._tag === "Some") out.set(alias.value.cliSessionId, name.slice(0, -".json".length))
    }
    return out
  })
