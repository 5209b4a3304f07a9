/**
 * `skein pipeline run` on a real terminal: tmux on a private socket, the
 * screen read back. The progress is one line redrawn in place (done of
 * total, running, failed, cost against budget, ETA); Ctrl-C stops the run
 * with exit 130, no CLI left, and the run id to resume with. Only this
 * test's tmux server is ever killed.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Path from "node:path"
import { folder } from "./skein.js"
import { nothingLeft, terminal, waitFor } from "./terminal.js"

const fixture = Path.join(import.meta.dirname, "fixtures", "slowPipeline.ts")

/** The progress line while items run: done of total, running, failed, cost of the budget, ETA. */
const running = /^(\d)\/6 done, ([12]) running, ([01]) failed, \$\d+\.\d{4} of \$0\.5000, ETA \d+s$/m

const args = (cwd: string) => ["pipeline", "run", fixture, "--fake-model", "--budget", "0.5", "--journal", Path.join(cwd, "journal.db")]

describe("skein pipeline run on a terminal", () => {
  it.scopedLive("one progress line redrawn in place: done, running, failed, cost against budget, ETA; then the outcome", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const t = yield* terminal(cwd, args(cwd), { joinWrapped: true })
      // Mid-run: items done and running, the ETA from the pace so far.
      const mid = yield* waitFor(t, running)
      expect(Number(running.exec(mid)![1])).toBeGreaterThanOrEqual(1)
      const end = yield* waitFor(t, /\[exit \d+\]/)
      expect(end).toContain("[exit 0]")
      // The failed item is counted, and the last state is the run's own line.
      expect(end).toMatch(/^skein: run [0-9a-f-]{36}: 5\/6 done, 0 running, 1 failed, \$\d+\.\d{4} of \$0\.5000$/m)
      // Redrawn in place: one progress line on the screen, not one per event, and no plain event lines.
      expect(end.split("\n").filter((line) => / running, \d failed/.test(line))).toHaveLength(2)
      expect(end).not.toMatch(/^done review/m)
      // The outputs, on stdout: the five verdicts.
      expect(end.split("\n").filter((line) => line.startsWith("{\"file\":"))).toHaveLength(5)
      expect(yield* nothingLeft(t, cwd)).toEqual([])
    }), 180_000)

  it.scopedLive("Ctrl-C: exit 130, no CLI left, and the run id to resume with", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const t = yield* terminal(cwd, args(cwd), { joinWrapped: true })
      const mid = yield* waitFor(t, running)
      const runId = /^skein: run ([0-9a-f-]{36})$/m.exec(mid)?.[1]
      expect(runId).toBeDefined()
      t.keys("C-c")
      const end = yield* waitFor(t, /\[exit \d+\]/)
      expect(end).toContain("[exit 130]")
      // On a line of its own, under the progress line where the run stopped.
      // (The terminal echoes the key as ^C after it.)
      expect(end).toMatch(/^\d\/6 done, \d running, \d failed, \$\d+\.\d{4} of \$0\.5000(, ETA \d+s)?(\^C)?$/m)
      expect(end).toContain(`\nskein: interrupted run ${runId}; resume with: skein pipeline run ${fixture} --resume ${runId}\n`)
      expect(yield* nothingLeft(t, cwd)).toEqual([])
    }), 180_000)
})
