/**
 * The pid window that narrows the escapee sweep: it holds every pid given
 * since a child's start, across the allocator's wrap, and gives up (a full
 * sweep) once the allocator may have come round the whole cycle.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Stream } from "effect"
import * as Marker from "../src/internal/marker.js"
import * as PidWindow from "../src/internal/pidWindow.js"
import * as ProcessHost from "../src/ProcessHost.js"
import { guard } from "./procs.js"

const test = (origins: ReadonlyArray<PidWindow.Origin>, now: PidWindow.Now) => Option.getOrThrow(PidWindow.window(origins, now))

describe("PidWindow", () => {
  it("parses /proc/stat's process count and /proc/loadavg's last pid", () => {
    expect(PidWindow.parseForks("cpu  1 2 3\nintr 5 6\nctxt 9\nbtime 1\nprocesses 298574\nprocs_running 2\n")).toEqual(Option.some(298574))
    expect(PidWindow.parseForks("cpu  1 2 3\n")).toEqual(Option.none())
    expect(PidWindow.parseLastPid("4.84 7.05 5.41 2/107 6455\n")).toEqual(Option.some(6455))
    expect(PidWindow.parseLastPid("")).toEqual(Option.none())
  })

  it("holds the child's pid and those given after it, not those given before", () => {
    const inWindow = test([{ pid: 1000, forks: 50 }], { lastPid: 1200, forks: 300, pidMax: 32768 })
    expect([1000, 1001, 1200].map(inWindow)).toEqual([true, true, true])
    expect([999, 1201, 30000, 1].map(inWindow)).toEqual([false, false, false, false])
  })

  it("follows the allocator across its wrap at pid_max", () => {
    const inWindow = test([{ pid: 32700, forks: 50 }], { lastPid: 400, forks: 500, pidMax: 32768 })
    expect([32700, 32767, 300, 400].map(inWindow)).toEqual([true, true, true, true])
    expect([32699, 401, 1000].map(inWindow)).toEqual([false, false, false])
  })

  it("is the union of a batch's windows", () => {
    const inWindow = test([{ pid: 1000, forks: 50 }, { pid: 5000, forks: 60 }], { lastPid: 1100, forks: 100, pidMax: 32768 })
    // The second origin started before a wrap: its window runs on to pid_max and round to 1100.
    expect([1000, 1100, 5000, 20000, 10].map(inWindow)).toEqual([true, true, true, true, true])
    expect([1101, 4999].map(inWindow)).toEqual([false, false])
  })

  it("gives up when the allocator may have come round since an origin", () => {
    const now = { lastPid: 1200, forks: 20_000, pidMax: 32768 }
    expect(PidWindow.window([{ pid: 1000, forks: 3_616 }], now)).toEqual(Option.none())
    expect(PidWindow.window([{ pid: 1000, forks: 3_617 }], now)._tag).toBe("Some")
    // A count from the future is a count that cannot be trusted.
    expect(PidWindow.window([{ pid: 1000, forks: 20_001 }], now)).toEqual(Option.none())
  })

  it("lists a small window's pids, across the wrap, and no window past the limit", () => {
    const now = { lastPid: 1004, forks: 300, pidMax: 32768 }
    expect(PidWindow.windowPids([{ pid: 1000, forks: 50 }], now, 8)).toEqual(Option.some([1000, 1001, 1002, 1003, 1004]))
    expect(PidWindow.windowPids([{ pid: 32766, forks: 50 }], { ...now, lastPid: 2 }, 8)).toEqual(Option.some([32766, 32767, 1, 2]))
    expect(PidWindow.windowPids([{ pid: 1000, forks: 50 }, { pid: 1002, forks: 60 }], now, 5)).toEqual(
      Option.some([1000, 1001, 1002, 1003, 1004])
    )
    expect(PidWindow.windowPids([{ pid: 1000, forks: 50 }], now, 4)).toEqual(Option.none())
    // A window that cannot be told is no window.
    expect(PidWindow.windowPids([{ pid: 1000, forks: 50 }], { ...now, forks: 20_000 }, 8)).toEqual(Option.none())
  })

  it.scopedLive("a sweep within the window finds a setsid'd grandchild", () =>
    Effect.gen(function*() {
      let pids: Array<number> = []
      yield* guard(() => pids)
      const forks = Option.getOrThrow(PidWindow.forksBefore())
      const child = yield* ProcessHost.spawn({
        command: "sh",
        args: ["-c", "setsid sh -c 'echo $$; exec sleep 1000' </dev/null & wait"]
      })
      const line = yield* child.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runHead)
      const grandchild = Number(Option.getOrThrow(line))
      pids = [child.pid, grandchild]
      const origins = [{ pid: child.pid, forks }]
      const found = yield* Marker.scanAll(new Set([child.marker]), { origins })
      expect(found.get(child.marker)).toEqual(expect.arrayContaining([child.pid, grandchild]))
      expect(yield* Marker.scanAll(new Set([child.marker]))).toEqual(found)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))
})
