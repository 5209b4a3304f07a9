import { describe, expect, it } from "@effect/vitest"
import { CliMessage, Lenient } from "@skein/protocol"
import * as fs from "node:fs"
import * as path from "node:path"
import { fixtureFiles } from "./fixtures.js"

describe("captures of the real CLI", () => {
  it("exist", () => {
    expect(fixtureFiles().length).toBeGreaterThanOrEqual(5)
  })

  for (const file of fixtureFiles()) {
    it(`${path.basename(file)} decodes with zero Malformed and round-trips`, () => {
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
    })
  }
})
