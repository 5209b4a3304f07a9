/**
 * What `POST /session/:id/fork {messageID?}` branches: opencode forks the
 * messages before `messageID` (all of them without one). A served message id
 * is minted from the transcript as it is translated, so the branch point is
 * found by translating ever longer prefixes of the effective chain: the
 * entry before the one where `messageID` first appears.
 */
import type { Transcript } from "@skein/protocol"
import * as Either from "effect/Either"
import { History } from "@skein/canonical"
import type { EventTranslator } from "@skein/canonical"

/** The uuid to branch at; `undefined` when nothing precedes the message (the fork starts empty). */
export type Point = Either.Either<string | undefined, "NotFound">

export const branchPoint = (
  entries: ReadonlyArray<Transcript.ChainEntry>,
  options: EventTranslator.Options,
  messageID: string | undefined
): Point => {
  if (messageID === undefined) return Either.right(entries.at(-1)?.uuid)
  for (let length = 1; length <= entries.length; length++) {
    const { messages } = History.fromEntries(options, entries.slice(0, length))
    if (messages.some((m) => m.info.id === messageID)) return Either.right(entries[length - 2]?.uuid)
  }
  return Either.left("NotFound")
}
