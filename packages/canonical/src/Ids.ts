/**
 * opencode-shaped ids (`ses_`, `msg_`, `prt_`, `per_`, `que_`) that are a
 * pure function of what the CLI wrote, so that translating the same events
 * twice, or loading the same session from its transcript, gives the same ids.
 *
 * Layout, as opencode's: `<prefix>_` + 12 hex digits of a sort key + 14
 * characters. opencode's sort key is `epochMillis * 0x1000 + counter`; ours
 * has the same shape, but its time is the CLI's own clock (see below) and its
 * counter is a structural ordinal, and the 14 characters are a hash of the
 * CLI identifiers instead of random. Clients sort by id, so:
 *
 * - a message's key is `clock * 0x1000 + ordinal`, where `clock` is the
 *   `timestamp` of the last assistant message the CLI printed before this
 *   message began (stdout and transcript carry the same timestamps), user
 *   messages since that tick get ordinals 1, 2, … and assistant messages
 *   0x800 + n, so a prompt sorts before its answer even when the live stream
 *   never echoed the prompt;
 * - a part's id starts with its message's key, then 4 hex digits of its slot
 *   in the message (retries, step-start, block `i` at 0x200 + i, step-finish
 *   last), then 10 hash characters: parts sort in order within a message;
 * - the hash inputs are the CLI's session UUID plus the API message id
 *   (assistant messages), the entry uuid (user messages, compaction), the
 *   `request_id` (permissions and questions); a part's hash is its message's,
 *   mixed with its slot (the block index for content blocks).
 */

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

const CODES = Array.from(BASE62, (c) => c.charCodeAt(0))

/** Three 32-bit lanes hashed from an identity string, FNV-1a style, in int32 arithmetic. */
export interface Seed {
  readonly a: number
  readonly b: number
  readonly c: number
}

export const seed = (identity: string): Seed => {
  let a = 0x811c9dc5 | 0
  let b = 0x01000193 | 0
  let c = 0x5bd1e995 | 0
  for (let i = 0; i < identity.length; i++) {
    const code = identity.charCodeAt(i)
    a = Math.imul(a ^ code, 0x01000193)
    b = Math.imul(b ^ code, 0x5bd1e995)
    c = Math.imul(c ^ code, 0x27d4eb2d)
  }
  return { a, b, c }
}

const mix = (lane: number, salt: number): number => {
  let h = Math.imul(lane ^ salt, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

/** Five base62 characters of one mixed lane, least significant first. */
const five = (lane: number): string => {
  let h = lane
  const c0 = CODES[h % 62]!
  h = Math.floor(h / 62)
  const c1 = CODES[h % 62]!
  h = Math.floor(h / 62)
  const c2 = CODES[h % 62]!
  h = Math.floor(h / 62)
  const c3 = CODES[h % 62]!
  h = Math.floor(h / 62)
  return String.fromCharCode(c0, c1, c2, c3, CODES[h % 62]!)
}

/**
 * `length` (≤ 15) base62 characters from a seed and a salt. Parts mint their
 * ids from their message's seed and their slot, so a part costs no pass over
 * a string. Lanes a, b, c give five characters each, in that order; only the
 * lanes the length reaches are computed.
 */
export const chars = (from: Seed, salt: number, length: number): string => {
  let out = five(mix(from.a, salt))
  if (length > 5) out += five(mix(from.b, salt))
  if (length > 10) out += five(mix(from.c, salt))
  return out.length === length ? out : out.slice(0, length)
}

/** `length` (≤ 15) base62 characters derived from `text`. */
export const hash = (text: string, length: number): string => chars(seed(text), 0, length)

const hex = (value: number, digits: number): string => {
  const clamped = Math.max(0, Math.min(Math.floor(value), 16 ** digits - 1))
  if (digits === 12 && !Number.isNaN(clamped)) {
    // A 48-bit key is no small integer: two 24-bit halves print faster than the whole.
    const high = Math.floor(clamped / 0x1000000)
    return high.toString(16).padStart(6, "0") + (clamped - high * 0x1000000).toString(16).padStart(6, "0")
  }
  return clamped.toString(16).padStart(digits, "0")
}

/** The parts of one message share its key: remember the last one's digits. */
let lastKey = -1
let lastKeyHex = ""
const keyHex = (key: number): string => {
  if (key !== lastKey) {
    lastKey = key
    lastKeyHex = hex(key, 12)
  }
  return lastKeyHex
}

/**
 * Ordinals of a message key within one tick of the CLI clock: user messages
 * the CLI prints count up from 1, prompts (which only the transcript has)
 * from `PROMPT_ORDINAL`, assistant messages from `ASSISTANT_ORDINAL`, so a
 * prompt missing from the live stream shifts no other message's id.
 */
export const PROMPT_ORDINAL = 0x400
export const ASSISTANT_ORDINAL = 0x800

const KEY_SPACE = 2 ** 48

/**
 * `clockMillis * 0x1000 + ordinal` in 48 bits, as opencode packs time and
 * counter (it keeps the low 6 bytes too, so keys wrap every ~795 days).
 */
export const sortKey = (clockMillis: number, ordinal: number): number =>
  (Math.max(0, Math.floor(clockMillis)) * 0x1000 + (ordinal & 0xfff)) % KEY_SPACE

export type Prefix = "ses" | "msg" | "prt" | "per" | "que"

/** An id whose order is `key`'s, and whose rest identifies `identity`. */
export const make = (prefix: Prefix, key: number, identity: string | Seed): string =>
  `${prefix}_${hex(key, 12)}${chars(typeof identity === "string" ? seed(identity) : identity, 0, 14)}`

/** Slots of the parts within one message, in display order. */
export const Slot = {
  retry: (attempt: number) => 0x010 + Math.min(attempt, 0xef),
  compaction: 0x100,
  stepStart: 0x180,
  block: (index: number) => 0x200 + index,
  stepFinish: 0xffff
} as const

/** The part in `slot` of the message whose key is `messageKey` and whose identity is `message`. */
export const part = (messageKey: number, slot: number, message: Seed): string =>
  `prt_${keyHex(messageKey)}${slotHex(slot)}${chars(message, slot + 1, 10)}`

/** The slots' four hex digits, made once each (a handful of slots recur in every message). */
const slotDigits: Array<string | undefined> = []
const slotHex = (slot: number): string => {
  if (!Number.isInteger(slot) || slot < 0 || slot > 0xffff) return hex(slot, 4)
  return slotDigits[slot] ??= hex(slot, 4)
}

/**
 * A session id from the CLI's session UUID. `createdAt` (epoch ms), when the
 * caller knows it, makes sessions sort by creation; the UUID alone is enough
 * for the id to be stable.
 */
export const session = (cliSessionId: string, createdAt = 0): string => make("ses", sortKey(createdAt, 0), cliSessionId)

/** Reads the sort key back from an id made here. */
export const keyOf = (id: string): number => Number.parseInt(id.slice(4, 16), 16)
