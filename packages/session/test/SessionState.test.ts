/**
 * Folding a read of stdout at once: `applyAll` gives the state that applying
 * each message in turn gives, on the messages of real CLI captures.
 */
import { describe, expect, it } from "@effect/vitest"
import { CliMessage, Lenient } from "@skein/protocol"
import { FastCheck } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as SessionState from "../src/SessionState.js"

const fixtures = Path.join(import.meta.dirname, "..", "..", "protocol", "test", "fixtures")
const messages = Fs.readdirSync(fixtures).filter((f) => f.endsWith(".ndjson")).sort().flatMap((file) =>
  Lenient.decodeAll(CliMessage.decoder, Fs.readFileSync(Path.join(fixtures, file))).flatMap((d) => d._tag === "Message" ? [d.message] : [])
)

describe("SessionState.applyAll", () => {
  it("equals apply message by message, however the messages are cut into reads", () => {
    expect(messages.length).toBeGreaterThan(50)
    const initial = SessionState.initial({ cwd: "/tmp" })
    FastCheck.assert(
      FastCheck.property(FastCheck.array(FastCheck.nat({ max: messages.length }), { maxLength: 20 }), (cuts) => {
        const points = [...new Set([0, ...cuts, messages.length])].sort((a, b) => a - b)
        let one = initial
        let all = initial
        for (let i = 1; i < points.length; i++) {
          const read = messages.slice(points[i - 1], points[i])
          const now = i * 1000
          for (const message of read) one = SessionState.apply(one, message, now)
          // An empty read still marks the session seen, as a line that is no message does.
          if (read.length === 0) one = { ...one, lastSeenAt: now }
          all = SessionState.applyAll(all, read, now)
          expect(all).toEqual(one)
        }
      }),
      { numRuns: 100 }
    )
  })
})
