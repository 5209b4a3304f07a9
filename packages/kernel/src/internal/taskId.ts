import { randomBytes } from "node:crypto"

const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
/** The largest multiple of 36 below 256: bytes at or above it are dropped so every character is equally likely. */
const limit = 256 - (256 % alphabet.length)

/** `length` characters of [0-9a-z] from a cryptographic source, by rejection sampling. */
export const randomSuffix = (length: number): string => {
  let out = ""
  while (out.length < length) {
    // 252/256 of the bytes are kept, so a few spare bytes almost always suffice.
    for (const byte of randomBytes(length + 4)) {
      if (byte < limit) {
        out += alphabet.charAt(byte % alphabet.length)
        if (out.length === length) break
      }
    }
  }
  return out
}
