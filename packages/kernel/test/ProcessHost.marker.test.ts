/**
 * Descendants that leave the process group (setsid, as the Claude Code CLI
 * does for every Bash command) are found by the child's environment marker:
 * at scope close, and when reaping the orphans of a runtime that was SIGKILLed.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger, Option, Schema, Stream } from "effect"
import * as TsChild from "@skein/testkit/TsChild"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import * as Marker from "../src/internal/marker.js"
import * as ProcessHost from "../src/ProcessHost.js"
import * as ProcessJournal from "../src/ProcessJournal.js"
import { guard, isAlive, isGone, waitGone } from "./procs.js"

const fixture = NodePath.join(import.meta.dirname, "fixtures/setsid-owner.ts")
const repoRoot = NodePath.join(import.meta.dirname, "../../..")

const tempDir = Effect.acquireRelease(
  Effect.sync(() => NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "skein-marker-"))),
  (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
)

const pgrp = (pid: number): number => {
  const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2])
}

const environ = (pid: number): string => NodeFs.readFileSync(`/proc/${pid}/environ`, "latin1")

const fastStop = { stdinGrace: "100 millis", termGrace: "200 millis" } as const

describe("ProcessHost markers", () => {
  it("a marker is found in a chain of inherited markers, and only as a whole", () => {
    const value = Marker.chain(Marker.chain(undefined, "a.1"), "b.12")
    expect(value).toBe("a.1,b.12")
    const env = `PATH=/bin\0${Marker.variable}=${value}\0HOME=/root\0`
    expect(Marker.carries(env, "a.1")).toBe(true)
    expect(Marker.carries(env, "b.12")).toBe(true)
    expect(Marker.carries(env, "b.1")).toBe(false)
    expect(Marker.carries(`OTHER_${Marker.variable}=a.1\0`, "a.1")).toBe(false)
  })

  it.scopedLive("a setsid'd grandchild does not outlive its grandparent's scope", () =>
    Effect.gen(function*() {
      let pids: Array<number> = []
      yield* guard(() => pids)
      const { grandchild, marker } = yield* Effect.gen(function*() {
        const child = yield* ProcessHost.spawn({
          command: "sh",
          args: ["-c", "setsid sh -c 'echo $$; exec sleep 1000' </dev/null & wait"]
        })
        const line = yield* child.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runHead)
        const grandchild = Number(Option.getOrThrow(line))
        pids = [child.pid, grandchild]
        // Out of the group: the group SIGKILL alone would miss it.
        expect(pgrp(grandchild)).not.toBe(child.pgid)
        expect(pgrp(grandchild)).toBe(grandchild)
        expect(environ(grandchild)).toContain(`${Marker.variable}=`)
        expect(Marker.carries(environ(grandchild), child.marker)).toBe(true)
        return { grandchild, marker: child.marker }
      }).pipe(Effect.scoped)
      expect(yield* waitGone([grandchild])).toBe(true)
      expect(yield* Marker.scan(marker)).toEqual([])
    }).pipe(Effect.provide(ProcessHost.layerMemory({ stopTimeouts: fastStop }))))

  it.scopedLive("reaping after a SIGKILLed runtime kills its children's setsid'd descendants too", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const journal = NodePath.join(dir, "journal.json")
      let pids: Array<number> = []
      yield* guard(() => pids)

      const owner = yield* ProcessHost.spawn({
        command: process.execPath,
        args: [...TsChild.nodeArgs(fixture), journal],
        cwd: repoRoot,
        label: "setsid-owner"
      })
      const line = yield* owner.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runHead)
      const spawned: { leaders: [number, number]; grandchildren: [number, number]; markers: [string, string] } =
        JSON.parse(Option.getOrThrow(line))
      const [waitingLeader, exitedLeader] = spawned.leaders
      pids = [waitingLeader, ...spawned.grandchildren]

      const entries = Schema.decodeUnknownSync(Schema.Struct({ entries: Schema.Array(ProcessJournal.Entry) }))(
        JSON.parse(NodeFs.readFileSync(journal, "utf8"))
      ).entries
      expect(entries.map((e) => [e.label, e.marker])).toEqual([["waiting", spawned.markers[0]], ["exited", spawned.markers[1]]])

      yield* owner.kill("SIGKILL")
      expect((yield* owner.await).signal).toBe("SIGKILL")
      // No finalizer ran: the waiting shell and both escapees live on; the other shell exited.
      expect(pids.every(isAlive)).toBe(true)
      expect(isGone(exitedLeader)).toBe(true)

      const report = yield* Effect.flatMap(ProcessJournal.ProcessJournal, (j) => j.reap).pipe(
        Effect.provide(ProcessJournal.layer({ path: journal })),
        Effect.provide(NodeContext.layer),
        Effect.provide(Logger.remove(Logger.defaultLogger))
      )
      expect(yield* waitGone(pids)).toBe(true)
      const reaped = new Map(report.reaped.map((r) => [r.entry.label, [...r.members].sort()]))
      expect(reaped.get("waiting")).toEqual([waitingLeader, spawned.grandchildren[0]].sort())
      // Its group was empty: only the marker found the escapee.
      expect(reaped.get("exited")).toEqual([spawned.grandchildren[1]])
      expect(report.dropped).toEqual([])
      expect((yield* Effect.forEach(spawned.markers, Marker.scan)).flat()).toEqual([])
    }).pipe(Effect.provide(ProcessHost.layerMemory({ stopTimeouts: fastStop }))))
})
