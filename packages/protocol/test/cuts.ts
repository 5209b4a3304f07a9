/** `bytes` cut at these offsets (each taken modulo its length + 1), as a pipe might deliver it. */
export const splitAt = (bytes: Uint8Array, cuts: ReadonlyArray<number>): Array<Uint8Array> => {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
  const out: Array<Uint8Array> = []
  let from = 0
  for (const p of points) {
    out.push(bytes.slice(from, p))
    from = p
  }
  out.push(bytes.slice(from))
  return out
}
