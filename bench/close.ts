/**
 * Closing a session, with the default stop timeouts (stdin grace 2 s, term
 * grace 3 s): time from `Scope.close` to the CLI's pid gone, for a CLI that
 * ignores everything (never answers `interrupt`, keeps running after stdin
 * ends, ignores SIGTERM: only SIGKILL ends it), against a baseline measured in
 * the same run: a CLI that exits as soon as its stdin ends.
 *
 *   npx tsx bench/close.ts        # 3 rounds
 *   npx tsx bench/close.ts 5
 *
 * Both are FakeCli children with one turn under way when the scope closes;
 * both answer `initialize`, the cooperative one answers `interrupt` too.
 * The stubborn one pays the bounded interrupt wait (1 s), the stdin grace and
 * the term grace; the ratio shows what the escalation costs, and the absolute
 * figures show that it stays within stdinGrace + termGrace + the interrupt bound.
 *
 * A last row is the close most sessions have: idle, on testkit's stand-in
 * CLI, which exits at stdin's end: the scope's close, the pid gone, and the
 * host CPU the close took.
 */
import { ProcessHost } from "@skein/kernel"
import { Session } from "@skein/session"
import { FakeCli, StandInCli } from "@skein/testkit"
import { Duration, Effect, Exit, Queue, Scope } from "effect"
import * as Os from "node:os"

const rounds = Number(process.argv[2] ?? 3)

const scripts = {
  cooperative: FakeCli.textTurn("never finished", { during: [FakeCli.waitForEnd] }),
  stubborn: FakeCli.ignoresEverything()
}

/**
 * The common close: an idle session on testkit's stand-in CLI (one turn
 * done, the CLI exits at stdin's end), as a pipeline of short sessions pays
 * it per item. Times the close to the pid gone, and this process's CPU in it.
 */
const idleCloseOnce = Effect.gen(function*() {
  const cli = StandInCli.command()
  const scope = yield* Scope.make()
  const session = yield* Session.start({ cwd: Os.tmpdir(), executable: cli.command, executableArgs: cli.args }).pipe(Scope.extend(scope))
  yield* Effect.flatMap(session.send("go"), (turn) => turn.result)
  const started = performance.now()
  const cpu = process.cpuUsage()
  yield* Scope.close(scope, Exit.void)
  const used = process.cpuUsage(cpu)
  const closed = performance.now() - started
  while (ProcessHost.isAlive(session.pid)) yield* Effect.sleep("1 millis")
  return { closed, gone: performance.now() - started, cpu: (used.user + used.system) / 1000 }
})

/** Starts a session on `script`, waits until its turn runs, then times the close to the pid gone. */
const closeOnce = (script: FakeCli.Script) =>
  Effect.gen(function*() {
    const cmd = FakeCli.command(script, { cliArgs: [] })
    const scope = yield* Scope.make()
    const session = yield* Session.start({ cwd: Os.tmpdir(), executable: cmd.command, executableArgs: cmd.args, env: cmd.env })
      .pipe(Scope.extend(scope))
    const bus = yield* session.subscribe.pipe(Scope.extend(scope))
    yield* session.send("go")
    yield* Queue.take(bus).pipe(
      Effect.repeat({ until: (e) => e._tag === "Message" && e.message.type === "system" && e.message.subtype === "session_state_changed" })
    )
    const started = performance.now()
    yield* Scope.close(scope, Exit.void)
    while (ProcessHost.isAlive(session.pid)) yield* Effect.sleep("5 millis")
    return performance.now() - started
  })

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0

const main = Effect.gen(function*() {
  const times = { cooperative: [] as Array<number>, stubborn: [] as Array<number> }
  for (let round = 0; round < rounds; round++) {
    // Alternate the contenders: the machine is shared and noisy.
    times.cooperative.push(yield* closeOnce(scripts.cooperative))
    times.stubborn.push(yield* closeOnce(scripts.stubborn))
  }
  const idle: Array<{ readonly closed: number; readonly gone: number; readonly cpu: number }> = []
  // A warm-up, then more rounds than the slow rows: each takes milliseconds.
  yield* idleCloseOnce
  for (let round = 0; round < rounds * 10; round++) idle.push(yield* idleCloseOnce)
  const { stdinGrace, termGrace } = ProcessHost.defaultStopTimeouts
  console.log(`stop timeouts: stdin grace ${Duration.format(stdinGrace)}, term grace ${Duration.format(termGrace)}; ${rounds} rounds`)
  for (const [name, xs] of Object.entries(times)) {
    console.log(`${name.padEnd(12)} median ${median(xs).toFixed(0)} ms  (${xs.map((x) => x.toFixed(0)).join(", ")})`)
  }
  console.log(`stubborn / cooperative: ${(median(times.stubborn) / median(times.cooperative)).toFixed(2)}x`)
  const best = (xs: ReadonlyArray<number>) => Math.min(...xs)
  const row = (label: string, xs: ReadonlyArray<number>, digits: number) =>
    `${label} median ${median(xs).toFixed(digits)} ms, best ${best(xs).toFixed(digits)} ms`
  console.log(
    `idle, exits at EOF (stand-in CLI), ${idle.length} rounds: ` +
      [
        row("scope close", idle.map((x) => x.closed), 1),
        row("to the pid gone", idle.map((x) => x.gone), 1),
        row("host CPU in the close", idle.map((x) => x.cpu), 2)
      ].join("; ")
  )
})

Effect.runPromise(main.pipe(Effect.provide(ProcessHost.layerMemory()))).catch((error) => {
  console.error(error)
  process.exit(1)
})
