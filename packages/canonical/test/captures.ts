import { CliMessage, Lenient } from "@skein/protocol"
import type { Turn } from "@skein/session"
import * as fs from "node:fs"
import * as path from "node:path"
import { EventTranslator } from "@skein/canonical"

/** The real-CLI captures of `@skein/protocol` (2.1.332 at the top, older releases in `cli-*` folders). */
export const fixturesDir = path.join(import.meta.dirname, "../../protocol/test/fixtures")

export interface Capture {
  readonly name: string
  readonly file: string
  readonly events: ReadonlyArray<Turn.SessionEvent>
  readonly cliSessionId: string
  /** The session's transcript, when the capture kept it. */
  readonly transcript: string | undefined
}

const load = (file: string, name: string): Capture => {
  const events = Lenient.decodeAll(CliMessage.decoder, fs.readFileSync(file))
  const transcript = file.replace(/\.ndjson$/, ".transcript.jsonl")
  return {
    name,
    file,
    events,
    cliSessionId: EventTranslator.cliSessionIdOf(events) ?? "",
    transcript: fs.existsSync(transcript) ? transcript : undefined
  }
}

/** The 2.1.332 captures. */
export const captures = (): ReadonlyArray<Capture> =>
  fs.readdirSync(fixturesDir)
    .filter((f) => f.endsWith(".ndjson"))
    .sort()
    .map((f) => load(path.join(fixturesDir, f), f.replace(/\.ndjson$/, "")))

/** Captures of older releases, where present. */
export const olderCaptures = (): ReadonlyArray<Capture> =>
  fs.readdirSync(fixturesDir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && d.name.startsWith("cli-"))
    .flatMap((d) =>
      fs.readdirSync(path.join(fixturesDir, d.name))
        .filter((f) => f.endsWith(".ndjson"))
        .sort()
        .map((f) => load(path.join(fixturesDir, d.name, f), `${d.name}/${f.replace(/\.ndjson$/, "")}`))
    )

export const translate = (capture: Capture, options?: Partial<EventTranslator.Options>) =>
  EventTranslator.translateAll({ cliSessionId: capture.cliSessionId, ...options }, capture.events)
