import { describe, expect, it } from "@effect/vitest"
import { CliMessage, Lenient } from "@skein/protocol"
import * as fs from "node:fs"
import * as path from "node:path"
import { fixtureFiles, releaseFixtureFiles } from "./fixtures.js"

/** Every line decodes to a Message or an Unknown kept as data, none Malformed, and each round-trips. */
const decodesCleanly = (file: string) => {
  const bytes = fs.readFileSync(file)
  const decoded = Lenient.decodeAll(CliMessage.decoder, bytes)
  const diagnostics = decoded.filter(Lenient.isDiagnostic)
  expect(diagnostics).toEqual([])
  const lines = bytes.toString("utf8").split("\n").filter((l) => l.trim().length > 0)
  expect(decoded.length).toBe(lines.length)
  decoded.forEach((d, i) => {
    const json: unknown = JSON.parse(lines[i]!)
    expect(d._tag === "Message" ? d.message : d._tag === "Unknown" ? d.json : undefined).toEqual(json)
  })
  return decoded
}

describe("captures of the real CLI", () => {
  it("exist", () => {
    expect(fixtureFiles().length).toBeGreaterThanOrEqual(5)
  })

  for (const file of fixtureFiles()) {
    it(`${path.basename(file)} decodes with zero Malformed and round-trips`, () => {
      decodesCleanly(file)
    })
  }
})

describe("captures of older CLI releases", () => {
  it("exist for at least one release, with the core scenarios", () => {
    expect(releaseFixtureFiles().size).toBeGreaterThanOrEqual(1)
    const core = ["background-task", "compact", "interrupt", "permission", "text-thinking"].map((name) => `${name}.ndjson`)
    for (const files of releaseFixtureFiles().values()) {
      expect(files.map((file) => path.basename(file))).toEqual(expect.arrayContaining(core))
    }
  })

  for (const [version, files] of releaseFixtureFiles()) {
    for (const file of files) {
      it(`${version}/${path.basename(file)} decodes with zero Malformed and round-trips`, () => {
        const decoded = decodesCleanly(file)
        // The 2.0 line's shapes are all known ones: nothing falls back to Unknown.
        expect(decoded.filter((d) => d._tag !== "Message").map((d) => d._tag)).toEqual([])
      })
    }
  }
})
