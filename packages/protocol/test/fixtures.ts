import * as fs from "node:fs"
import * as path from "node:path"

/** The directory of real CLI captures, recorded by `packages/testkit/src/bin/capture.ts`. */
export const fixturesDir = path.join(import.meta.dirname, "fixtures")

export const fixtureFiles = (): ReadonlyArray<string> =>
  fs.existsSync(fixturesDir)
    ? fs.readdirSync(fixturesDir).filter((f) => f.endsWith(".ndjson")).sort().map((f) => path.join(fixturesDir, f))
    : []

export const fixtureLines = (): ReadonlyArray<string> =>
  fixtureFiles().flatMap((file) => fs.readFileSync(file, "utf8").split("\n").filter((l) => l.trim().length > 0))
