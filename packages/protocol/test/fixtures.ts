import * as fs from "node:fs"
import * as path from "node:path"

/** The directory of real CLI captures, recorded by `packages/testkit/src/bin/capture.ts`. */
export const fixturesDir = path.join(import.meta.dirname, "fixtures")

const ndjsonIn = (dir: string): ReadonlyArray<string> =>
  fs.existsSync(dir)
    ? fs.readdirSync(dir).filter((f) => f.endsWith(".ndjson")).sort().map((f) => path.join(dir, f))
    : []

/** Captures of the pinned release (2.1.332). */
export const fixtureFiles = (): ReadonlyArray<string> => ndjsonIn(fixturesDir)

/** Captures of other releases, one `cli-<version>/` folder each: version → files. */
export const releaseFixtureFiles = (): ReadonlyMap<string, ReadonlyArray<string>> =>
  new Map(
    (fs.existsSync(fixturesDir) ? fs.readdirSync(fixturesDir) : [])
      .filter((name) => name.startsWith("cli-"))
      .sort()
      .map((name) => [name.slice("cli-".length), ndjsonIn(path.join(fixturesDir, name))])
  )

export const fixtureLines = (): ReadonlyArray<string> =>
  fixtureFiles().flatMap((file) => fs.readFileSync(file, "utf8").split("\n").filter((l) => l.trim().length > 0))
