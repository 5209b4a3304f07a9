/**
 * Cluster runners as OS processes (see `runner.ts`), and a raw SSE client
 * that keeps each frame's `id:` so it can switch runners with `Last-Event-ID`.
 */
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlStore } from "@skein/sql"
import { TsChild } from "@skein/testkit"
import { Effect, HashRing, Schedule } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { RunnerConfig } from "./runner.js"

export interface RunnerProcess {
  readonly url: string
  readonly child: ChildProcess.ChildProcess
  readonly config: RunnerConfig
  /** Everything it printed. */
  readonly output: () => string
}

const entry = Path.join(import.meta.dirname, "runner.ts")

/** Starts a runner in the current scope (SIGKILLed with it if still running); waits until it listens. */
export const spawnRunner = (config: RunnerConfig) =>
  Effect.acquireRelease(
    Effect.async<RunnerProcess, Error>((resume) => {
      const child = ChildProcess.spawn(process.execPath, [...TsChild.nodeArgs(entry, "tsx"), JSON.stringify(config)], {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, NO_COLOR: "1" }
      })
      let output = ""
      let done = false
      const onData = (text: string) => {
        output += text
        const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1]
        if (url !== undefined && !done) {
          done = true
          resume(Effect.succeed({ url, child, config, output: () => output }))
        }
      }
      child.stdout.setEncoding("utf8").on("data", onData)
      child.stderr.setEncoding("utf8").on("data", (text: string) => (output += text))
      child.once("exit", (code, signal) => {
        if (!done) {
          done = true
          resume(Effect.fail(new Error(`the runner exited (${code ?? signal}) before it listened:\n${output}`)))
        }
      })
    }).pipe(Effect.timeoutFail({ duration: "90 seconds", onTimeout: () => new Error("the runner did not listen within 90 s") })),
    release
  )

/** Pids of every live descendant of `pid` (the CLIs a runner started run in process groups of their own). */
const descendants = (pid: number): ReadonlyArray<number> => {
  const children = new Map<number, Array<number>>()
  for (const name of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      // The parent pid is the 2nd field after the command, which is in parentheses and may hold spaces.
      const stat = Fs.readFileSync(`/proc/${name}/stat`, "utf8")
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)])
    } catch {
      // gone meanwhile
    }
  }
  const out: Array<number> = []
  const visit = (p: number) => (children.get(p) ?? []).forEach((c) => (out.push(c), visit(c)))
  visit(pid)
  return out
}

const signal = (pids: ReadonlyArray<number>, name: NodeJS.Signals) => {
  for (const p of pids) {
    try {
      process.kill(p, name)
    } catch {
      // exited already
    }
  }
}

/** What each killed runner had started: killed when the runner's scope closes. */
const orphans = new WeakMap<RunnerProcess, ReadonlyArray<number>>()

/**
 * SIGKILL, as a machine that dies; waits for the exit. The CLIs it started
 * live on until the runner's scope closes (`release`): killed with it, a CLI
 * that died first was seen and answered for by its runner in some runs.
 */
export const kill = (runner: RunnerProcess) =>
  Effect.async<void>((resume) => {
    if (runner.child.exitCode !== null || runner.child.signalCode !== null) return resume(Effect.void)
    if (runner.child.pid !== undefined) orphans.set(runner, descendants(runner.child.pid))
    runner.child.once("exit", () => resume(Effect.void))
    runner.child.kill("SIGKILL")
  })

/** The runner killed, then whatever it started (else a CLI mid-reply holds the model server open for minutes). */
const release = (runner: RunnerProcess) =>
  Effect.zipRight(kill(runner), Effect.sync(() => signal(orphans.get(runner) ?? [], "SIGKILL")))

export interface Frame {
  readonly id: string
  readonly type: string
  readonly properties: Record<string, unknown>
}

/** A subscriber to one runner's `/event`: its frames so far, and a way to hang up. */
export interface Subscriber {
  readonly frames: Array<Frame>
  readonly close: () => void
  /** Resolves with the frames once one satisfies `done`. */
  readonly until: (done: (frame: Frame) => boolean, timeoutMs?: number) => Promise<ReadonlyArray<Frame>>
}

export const subscribe = (url: string, token: string, directory: string, lastEventId?: string): Subscriber => {
  const frames: Array<Frame> = []
  const waiters: Array<{ readonly done: (frame: Frame) => boolean; readonly resolve: () => void }> = []
  const controller = new AbortController()
  const read = async () => {
    const response = await fetch(`${url}/event?directory=${encodeURIComponent(directory)}`, {
      headers: { authorization: `Bearer ${token}`, ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }) },
      signal: controller.signal
    })
    const decoder = new TextDecoder()
    let buffer = ""
    for await (const chunk of response.body!) {
      buffer += decoder.decode(chunk, { stream: true })
      let end: number
      while ((end = buffer.indexOf("\n\n")) !== -1) {
        const raw = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const id = /^id: ?(.*)$/m.exec(raw)?.[1]
        const data = raw.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n")
        if (id === undefined || data === "") continue
        const event = JSON.parse(data) as { type: string; properties: Record<string, unknown> }
        const frame = { id, type: event.type, properties: event.properties }
        frames.push(frame)
        for (const w of waiters.slice()) {
          if (w.done(frame)) {
            waiters.splice(waiters.indexOf(w), 1)
            w.resolve()
          }
        }
      }
    }
  }
  read().catch(() => undefined)
  return {
    frames,
    close: () => controller.abort(),
    until: (done, timeoutMs = 60_000) =>
      frames.some(done) ? Promise.resolve(frames.slice()) : new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no such frame within ${timeoutMs} ms; saw ${frames.map((f) => f.type).join(", ")}`)), timeoutMs)
        waiters.push({ done, resolve: () => (clearTimeout(timer), resolve(frames.slice())) })
      })
  }
}

/** The `error.name` of a `session.error` frame. */
export const errorName = (frame: Frame): string | undefined => {
  const error = frame.properties["error"]
  return frame.type === "session.error" && typeof error === "object" && error !== null && "name" in error && typeof error.name === "string"
    ? error.name
    : undefined
}

/** A JSON call to a runner's HTTP API with the bearer token; the parsed answer, or an Error naming the status. */
export const api = (url: string, token: string) => async (method: string, path: string, body?: unknown) => {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return text === "" ? undefined : JSON.parse(text)
}

/** The shards of a group (the library's default, which the runners keep). */
const shardsPerGroup = 300

/**
 * Which runner each shard of the `default` group goes to (index 0 is shard
 * 1) while exactly `runners` are healthy: the library's own assignment, a
 * hash ring of their addresses with weight 1.
 */
export const assignment = (runners: ReadonlyArray<RunnerProcess>): ReadonlyArray<RunnerProcess> => {
  const ring = HashRing.make<RunnerAddress.RunnerAddress>()
  for (const r of runners) HashRing.add(ring, RunnerAddress.make("127.0.0.1", r.config.runnerPort), { weight: 1 })
  const owners = HashRing.getShards(ring, shardsPerGroup) ?? []
  return owners.map((owner) => runners.find((r) => r.config.runnerPort === owner.port)!)
}

/** The advisory lock numbers each runner holds once settled (`SqlRunnerStorage` numbers a `default` shard 1000000 + shard). */
const expectedLocks = (runners: ReadonlyArray<RunnerProcess>): ReadonlyArray<string> => {
  const owners = assignment(runners)
  return runners.map((runner) => owners.flatMap((owner, i) => (owner === runner ? [1_000_000 + i + 1] : [])).join(","))
}

/**
 * Waits until each of `runners` holds the shard locks the cluster assigns it
 * (Postgres only). Runners listen before they have seen each other: until
 * then shards move between them, and a session's entity with them, so a
 * test that reads where a session runs must wait for this first.
 */
export const awaitShardsSettled = (database: string, runners: ReadonlyArray<RunnerProcess>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const expected = expectedLocks(runners)
    const held = sql<{ readonly locks: string }>`SELECT string_agg(objid::text, ',' ORDER BY objid) AS locks
      FROM pg_locks WHERE locktype = 'advisory' AND granted GROUP BY pid`.pipe(
      Effect.map((rows) => new Set(rows.map((row) => row.locks)))
    )
    yield* held.pipe(
      Effect.filterOrFail((sets) => expected.every((locks) => sets.has(locks)), () => new Error("the shards are still moving")),
      Effect.retry(Schedule.spaced("250 millis")),
      Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => new Error("the runners' shards did not settle within 60 s") })
    )
  }).pipe(Effect.provide(SqlStore.layer(database)), Effect.orDie)

/**
 * The pid of the runner running `sessionID`'s open turn, from the turn ledger
 * (its runner is `host/pid/incarnation`); undefined while no turn is open.
 */
export const turnRunnerPid = (database: string, sessionID: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly runner: string }>`SELECT runner FROM skein_cluster_turns
      WHERE session_id = ${sessionID} AND ended IS NULL`
    const runner = rows[0]?.runner
    return runner === undefined ? undefined : Number(runner.split("/").at(-2))
  }).pipe(Effect.provide(SqlStore.layer(database)), Effect.orDie)

/** The shard (its number in the `default` group) of a session's entity, from a message sent to it. */
export const shardOf = (database: string, sessionID: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly shard_id: string }>`SELECT shard_id FROM cluster_messages
      WHERE entity_type = 'Session' AND entity_id = ${sessionID} LIMIT 1`
    const shard = rows[0]?.shard_id
    if (shard === undefined) return yield* Effect.dieMessage(`no message was sent to ${sessionID}`)
    return Number(shard.split(":").at(-1))
  }).pipe(Effect.provide(SqlStore.layer(database)), Effect.orDie)

/** A session's turns in the turn ledger, oldest first: the pid of the runner that started each, and how it ended. */
export const turns = (database: string, sessionID: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly runner: string; readonly outcome: string | null }>`SELECT runner, outcome
      FROM skein_cluster_turns WHERE session_id = ${sessionID} ORDER BY started`
    return rows.map((row) => ({ pid: Number(row.runner.split("/").at(-2)), outcome: row.outcome }))
  }).pipe(Effect.provide(SqlStore.layer(database)), Effect.orDie)

/**
 * A session (its first turn answered) whose shard `joiner` will take when it
 * joins `runners`, and the pid of the runner that holds it until then. Tries
 * up to 20 new sessions: each lands on a shard by its id's hash.
 */
export const sessionMovingTo = (
  database: string,
  runners: ReadonlyArray<RunnerProcess>,
  joiner: RunnerConfig,
  cwd: string
) =>
  Effect.gen(function*() {
    const first = runners[0]!
    const call = api(first.url, first.config.token)
    const placeholder = { ...first, config: joiner }
    const withJoiner = assignment([...runners, placeholder])
    for (let i = 0; i < 20; i++) {
      const created: { id: string } = yield* Effect.promise(() => call("POST", `/session?directory=${encodeURIComponent(cwd)}`, {}))
      yield* Effect.promise(() => call("POST", `/session/${created.id}/message`, { parts: [{ type: "text", text: `first of ${created.id}` }] }))
      const shard = yield* shardOf(database, created.id)
      if (withJoiner[shard - 1] === placeholder) return { session: created, hostPid: assignment(runners)[shard - 1]!.child.pid }
    }
    return yield* Effect.dieMessage("no session of 20 landed on a shard the joining runner takes")
  })

/** A runner's own config folder and temp folder under `root` (its disk, as another machine's would be). */
export const runnerDirs = (root: string, name: string) => {
  const dir = Path.join(root, name)
  Fs.mkdirSync(Path.join(dir, "config"), { recursive: true })
  Fs.mkdirSync(Path.join(dir, "tmp"), { recursive: true })
  return { configDir: Path.join(dir, "config"), tmpDir: Path.join(dir, "tmp") }
}
