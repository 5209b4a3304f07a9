/**
 * The length of the longest prefix of `bytes` that does not end inside a
 * UTF-8 sequence, so an incremental reader never splits a character between
 * two reads. Only a trailing sequence that is incomplete is held back;
 * malformed bytes pass through to the decoder.
 */
export const completePrefixLength = (bytes: Uint8Array): number => {
  const end = bytes.length
  // A sequence is at most 4 bytes, so its lead byte is within the last 4.
  for (let back = 1; back <= Math.min(4, end); back++) {
    const byte = bytes[end - back]
    if ((byte & 0xc0) === 0x80) continue // continuation byte: keep looking for the lead
    const needed = byte < 0x80 ? 1 : (byte & 0xe0) === 0xc0 ? 2 : (byte & 0xf0) === 0xe0 ? 3 : (byte & 0xf8) === 0xf0 ? 4 : 1
    return needed > back ? end - back : end
  }
  return end
}
