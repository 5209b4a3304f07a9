/**
 * Where a command's CLI runs: the person's own login and settings, or
 * (`--fake-model`) offline against a local fake model with a throwaway
 * config folder unless one is given.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { ClaudeCli } from "@skein/testkit"
import { Effect, Option } from "effect"
import * as Path from "node:path"
import { fail } from "../CliError.js"
import * as FakeModel from "./fakeModel.js"
import * as Lookup from "./lookup.js"

export interface Where {
  /** The CLI's CLAUDE_CONFIG_DIR; undefined: the person's own (CLAUDE_CONFIG_DIR, else ~/.claude). */
  readonly configDir: string | undefined
  readonly env: Record<string, string | undefined> | undefined
  readonly bare: boolean
}

export const target = (options: {
  readonly fakeModel: boolean
  readonly root: Option.Option<string>
  /** With the fake model: the whole CLI rather than `--bare`. */
  readonly fullCli?: boolean | undefined
}) =>
  Effect.gen(function*() {
    // A --root that does not exist is a typo, not a folder to create.
    const root = Option.isSome(options.root) ? Option.some(yield* Lookup.existingRoot(options.root.value)) : Option.none<string>()
    if (!options.fakeModel) return { configDir: Option.getOrUndefined(root), env: undefined, bare: false } satisfies Where
    const model = yield* FakeModel.start.pipe(Effect.mapError((e) => fail(`the fake model could not start: ${e.message}`)))
    const fs = yield* FileSystem.FileSystem
    const scratch = yield* fs.makeTempDirectoryScoped({ prefix: "skein-run-" }).pipe(Effect.orDie)
    const configDir = Option.getOrElse(root, () => Path.join(scratch, "config"))
    const tmpDir = Path.join(scratch, "tmp")
    yield* Effect.orDie(Effect.all([fs.makeDirectory(configDir, { recursive: true }), fs.makeDirectory(tmpDir)]))
    return {
      configDir,
      env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir, tmpDir }),
      bare: options.fullCli !== true
    } satisfies Where
  })
