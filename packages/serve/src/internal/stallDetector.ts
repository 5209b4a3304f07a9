/**
 * Tells a dead client from a slow one at each heartbeat: stalled when frames
 * waited and nothing was taken across `maxStalls` ticks in a row.
 */
export type State = "live" | "stalled"

/** `tick(pending, takes)`: whether frames are pending now, and how many takes there have been so far. */
export const make = (maxStalls: number) => {
  let takesAtTick = 0
  let stalls = 0
  return (pending: boolean, takes: number): State => {
    stalls = pending && takes === takesAtTick ? stalls + 1 : 0
    takesAtTick = takes
    return stalls >= maxStalls ? "stalled" : "live"
  }
}
