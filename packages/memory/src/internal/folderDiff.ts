/** The `.md` files of a memory folder before and after a worker ran. */
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect } from "effect"
import * as Path from "node:path"

export type Contents = ReadonlyMap<string, string>

export const contents = (dir: string): Effect.Effect<Contents, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const names = yield* fs.readDirectory(dir).pipe(Effect.orElseSucceed((): Array<string> => []))
    const files = new Map<string, string>()
    for (const name of names.filter((n) => n.endsWith(".md")).sort()) {
      const text = yield* fs.readFileString(Path.join(dir, name)).pipe(Effect.option)
      if (text._tag === "Some") files.set(name, text.value)
    }
    return files
  })

export const diff = (before: Contents, after: Contents) => ({
  written: [...after].filter(([name, text]) => before.get(name) !== text).map(([name]) => name),
  removed: [...before.keys()].filter((name) => !after.has(name))
})
