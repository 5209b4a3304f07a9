/**
 * The serve path, CLI stdout to SSE client, for one long streamed reply:
 * FakeModel streams N text deltas (default 100,000; two words each, 1.5 MB
 * of text), and three contenders deliver them to one reader, in one run:
 *
 * - **raw pipe**: the real CLI (`-p --output-format stream-json --verbose
 *   --include-partial-messages --bare`) run directly; the reader parses its
 *   stdout lines and counts the `stream_event` text deltas. The baseline.
 * - **skein**: `Serve.layer` over `NodeHttpServer` (as the serve tests'
 *   harness builds it), on kernel's `SlicedScheduler` as `skein serve` runs
 *   it, the same CLI behind it; one SSE client on `/event`
 *   counts `message.part.delta` frames until `session.idle`, and resumes
 *   with `Last-Event-ID` (as the SDK's client does) if the server ends it.
 * - **skein (process)**: the same server in a process of its own
 *   (`examples/serve.ts`, as `skein serve` runs it; its CLIs not `--bare`,
 *   offline through the environment they inherit). In process, skein shares
 *   this event loop with FakeModel, the proxy and the reader; opencode never
 *   does, so this is the like-for-like line. Same reader as skein.
 * - **opencode**: `opencode serve` (1.18.33) spawned with its `anthropic`
 *   provider pointed at the same FakeModel; one SSE client on its `/event`
 *   counts `message.part.delta` until its `session.idle`.
 * - **skein log** (a diagnostic, not a contender): the same skein setup, the
 *   turn read in process from the server's event log (`ServerEvents.follow`)
 *   instead of over SSE, each delta timed by its record's append time (ms):
 *   the rate into the log. Its ratio to skein serve is what the SSE edge keeps.
 *   (The follower itself costs this event loop, so it is a rough split.)
 *
 *   npx tsx bench/serve.ts            # 100,000 deltas (about a minute here)
 *   npx tsx bench/serve.ts 20000      # fewer
 *
 * Every contender reaches FakeModel through a pass-through proxy in this
 * process that stamps each delta (by the word index in its text) when its
 * bytes arrive from FakeModel on their way out. FakeModel sends the reply as
 * fast as the socket takes it, so these are saturation figures. At the reader:
 * - **deltas/s**: N over the time from the first stamp to the last delta's
 *   arrival: what the whole path sustains, its buffering included (the
 *   ratios use it). "burst" is N over first to last arrival only: a server
 *   that holds deltas back and then flushes them scores high there alone.
 * - **delay**: per frame, its arrival minus the stamp of the oldest delta it
 *   carries (p50, p99, max): model bytes out to reader receipt, which
 *   includes the socket buffers into the CLI or opencode and their parsing.
 *   The skein - raw difference is what serve adds on top of the CLI.
 * - **frame gap p99**: between consecutive delta frames at the reader. A
 *   server may coalesce deltas into fewer frames: frames are printed, and
 *   the delivered text's length is checked against the reply's.
 *
 * Both servers get a short warm-up turn on the same session first (opencode
 * boots its instance on the first request, skein starts the CLI). Targets:
 * skein >= 2x opencode's deltas/s, and >= 0.5x the raw pipe's; a target not
 * met is printed as such, and the bench still exits 0. Every CLI run is
 * offline: `ANTHROPIC_BASE_URL` is FakeModel (through the proxy) on
 * 127.0.0.1, non-essential traffic is off, and each has its own
 * `CLAUDE_CONFIG_DIR`.
 */
import { NodeContext, NodeHttpServer } from "@effect/platform-node"
import * as HttpServer from "@effect/platform/HttpServer"
import { ProcessHost, SlicedScheduler } from "@skein/kernel"
import { Serve, ServerEvents } from "@skein/serve"
import { ClaudeCli, FakeModel, Opencode } from "@skein/testkit"
import type { Scope } from "effect"
import { Context, Effect, Fiber, Layer, Option, Stream } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Readline from "node:readline"
import type { Readable } from "node:stream"

const positional = process.argv.slice(2).filter((a) => !a.startsWith("--"))
/** `--only=raw,skein,log,process,opencode,fanout`: a subset of the contenders (for profiling); all by default. */
const only = process.argv.find((a) => a.startsWith("--only="))?.slice("--only=".length).split(",")
const runs = (name: string) => only === undefined || only.includes(name)
const deltas = Number(positional[0] ?? 100_000)
const flag = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback)
/** The fan-out row: this many SSE clients on one turn, against one client, for a reply of `fanoutDeltas`. */
const fanoutClients = flag("clients", 200)
const fanoutDeltas = Math.min(deltas, flag("fanout-deltas", 20_000))
/** `--profile=DIR`: the fan-out row's server writes a V8 CPU profile there (`node --cpu-prof`) when it exits. */
const profileDir = process.argv.find((a) => a.startsWith("--profile="))?.slice("--profile=".length)
const prompt = "Write the long reply"
/** `w0 w1 w2 …`: FakeModel streams two words per delta, so 2N words make N deltas. */
const replyText = Array.from({ length: deltas * 2 }, (_, i) => `w${i} `).join("")
/** How a server process of its own runs skein from source: node with tsx's loader (its pid is the server's). */
const serverNodeArgs = [
  "--conditions=@skein/source",
  "--import",
  Url.pathToFileURL(Path.resolve(import.meta.dirname, "../node_modules/tsx/dist/loader.mjs")).href
]
/** The server CPU (ms) of `skein (process)`'s measured turn, from /proc: a figure the machine's load moves little. */
let processCpuMs = Number.NaN
const serveEntry = Path.resolve(import.meta.dirname, "../examples/serve.ts")

/** This process's environment without what would steer a CLI elsewhere (NODE_OPTIONS, with its source condition, stays). */
const inherited = (): Record<string, string> =>
  Object.fromEntries(
    Object.entries(process.env).filter((entry): entry is [string, string] =>
      entry[1] !== undefined && !/^(ANTHROPIC_|CLAUDE|OTEL_)/.test(entry[0])
    )
  )
const token = "bench-token-0123456789"
const turnTimeout = 20 * 60_000

// --- measuring ---------------------------------------------------------------

/** When the model's bytes of delta k (its first word is `w{2k}`) left the proxy, ms on `performance.now()`. */
const sentAt = new Float64Array(deltas).fill(Number.NaN)
const firstSent = () => sentAt.reduce((min, t) => (Number.isNaN(t) ? min : Math.min(min, t)), Number.POSITIVE_INFINITY)
const deltaIndex = (text: string): number => {
  const word = /^w(\d+) /.exec(text)
  return word === null ? -1 : Number(word[1]) / 2
}

/**
 * A pass-through proxy in front of FakeModel that stamps each text delta as
 * its bytes go out: the publish time every contender's delay is measured from.
 */
const stampingProxy = (target: string) =>
  Effect.acquireRelease(
    Effect.async<Http.Server>((resume) => {
      const upstream = new URL(target)
      const server = Http.createServer((request, response) => {
        const forward = Http.request(
          { host: upstream.hostname, port: upstream.port, method: request.method, path: request.url, headers: request.headers },
          (answer) => {
            response.writeHead(answer.statusCode ?? 502, answer.headers)
            let buffer = ""
            answer.on("data", (chunk: Buffer) => {
              buffer += chunk.toString("utf8")
              const end = buffer.lastIndexOf("\n\n")
              if (end < 0) return
              const now = performance.now()
              for (const match of buffer.slice(0, end).matchAll(/"text_delta","text":"w(\d+) /g)) {
                const k = Number(match[1]) / 2
                if (k < deltas && Number.isNaN(sentAt[k]!)) sentAt[k] = now
              }
              buffer = buffer.slice(end + 2)
            })
            answer.pipe(response)
          }
        )
        forward.on("error", () => response.destroy())
        request.pipe(forward)
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
  ).pipe(Effect.map((server) => {
    const address = server.address()
    return `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`
  }))

/** What the reader saw of the measured turn. */
class Tally {
  readonly arrivals: Array<number> = []
  /** Per frame: its arrival minus the stamp of the oldest delta it carries. */
  readonly delays: Array<number> = []
  chars = 0
  link: Link = { reconnects: 0, resyncs: 0 }
  delta(text: string, now = performance.now()) {
    this.arrivals.push(now)
    this.chars += text.length
    const k = deltaIndex(text)
    if (k >= 0 && k < deltas) this.delays.push(now - sentAt[k]!)
  }
}

interface Figures {
  readonly name: string
  readonly frames: number
  readonly complete: boolean
  /** N over first model byte out to last delta in: what the whole path sustains, buffering included. */
  readonly perSecond: number
  /** N over first delta in to last delta in: the rate of the reader's burst alone. */
  readonly burst: number
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly gapP99: number
  readonly link: Link
  /** The longest this process's event loop (the reader's) was held during the turn: a frame gap this long may be the reader's own. */
  readonly readerStall: number
}

const figures = (name: string, tally: Tally): Figures => figuresOf(name, tally, deltas, replyText.length)

const figuresOf = (name: string, tally: Tally, deltas: number, textLength: number): Figures => {
  const a = tally.arrivals
  const span = a.length > 1 ? (a[a.length - 1]! - a[0]!) / 1000 : Number.NaN
  const gaps = a.slice(1).map((t, i) => t - a[i]!).sort((x, y) => x - y)
  const delays = tally.delays.filter((d) => !Number.isNaN(d)).sort((x, y) => x - y)
  const at = (xs: ReadonlyArray<number>, q: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? Number.NaN
  return {
    name,
    frames: a.length,
    complete: tally.chars === textLength,
    perSecond: deltas / ((a[a.length - 1]! - firstSent()) / 1000),
    burst: (deltas - 1) / span,
    p50: at(delays, 0.5),
    p99: at(delays, 0.99),
    max: delays[delays.length - 1] ?? Number.NaN,
    gapP99: at(gaps, 0.99),
    link: tally.link,
    readerStall: loopStall(firstSent(), a[a.length - 1] ?? Number.NaN)
  }
}

/** This process's event loop: a tick every 5 ms while a contender runs; a long gap between ticks is the loop held. */
const loopTicks: Array<number> = []
const ticking = (on: boolean) => {
  if (!on) return clearInterval(ticker)
  loopTicks.length = 0
  ticker = setInterval(() => loopTicks.push(performance.now()), 5)
}
let ticker: ReturnType<typeof setInterval> | undefined
const loopStall = (from: number, to: number) => {
  let longest = 0
  for (let i = 1; i < loopTicks.length; i++) {
    if (loopTicks[i]! >= from && loopTicks[i - 1]! <= to) longest = Math.max(longest, loopTicks[i]! - loopTicks[i - 1]!)
  }
  return longest
}

// --- readers -------------------------------------------------------------------

interface SseEvent {
  readonly type: string
  readonly properties: { readonly sessionID?: string; readonly delta?: string; readonly field?: string }
}

/** How often the reader had to reconnect, and the resyncs (lost events) it was sent. */
interface Link {
  reconnects: number
  resyncs: number
}

/**
 * Reads `data:` frames until `stop` says so. A stream the server ends early
 * is resumed as the SDK's client resumes it: with `Last-Event-ID` from the
 * last `id:` line. The returned promise settles once the first connection is
 * open; `done` once `stop` returned true.
 */
const subscribe = async (url: string, headers: Record<string, string>, stop: (event: SseEvent) => boolean) => {
  const controller = new AbortController()
  const link: Link = { reconnects: 0, resyncs: 0 }
  let lastId: string | undefined
  const open = async () => {
    const resume = lastId === undefined ? {} : { "last-event-id": lastId }
    const response = await fetch(url, { headers: { ...headers, ...resume, accept: "text/event-stream" }, signal: controller.signal })
    if (!response.ok || response.body === null) throw new Error(`GET ${url}: ${response.status}`)
    return response.body.getReader()
  }
  let reader = await open()
  const done = (async () => {
    const decoder = new TextDecoder()
    let buffer = ""
    for (;;) {
      const { done, value } = await reader.read()
      if (done) {
        if (lastId === undefined || ++link.reconnects > 100) throw new Error(`${url}: the stream ended before the turn did`)
        buffer = ""
        reader = await open()
        continue
      }
      buffer += decoder.decode(value, { stream: true })
      let end: number
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const id = /^id: ?(.*)$/m.exec(frame)
        if (id !== null) lastId = id[1]
        const data = /^data: (.*)$/m.exec(frame)
        if (data === null) continue
        const event: SseEvent = JSON.parse(data[1]!)
        if (event.type === "server.resync") link.resyncs++
        if (stop(event)) {
          controller.abort()
          return
        }
      }
    }
  })()
  return { done, link }
}

const post = async (url: string, headers: Record<string, string>, body: unknown): Promise<unknown> => {
  const response = await fetch(url, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) })
  if (!response.ok) throw new Error(`POST ${url}: ${response.status} ${await response.text()}`)
  const text = await response.text()
  return text.length === 0 ? undefined : JSON.parse(text)
}

const idOf = (value: unknown): string => {
  if (typeof value === "object" && value !== null && "id" in value && typeof value.id === "string") return value.id
  throw new Error(`no session id in ${JSON.stringify(value)}`)
}

const withTimeout = <A>(promise: Promise<A>, ms: number, what: string) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: timed out`)), ms).unref())
  ])

/**
 * One turn through an opencode-shaped server: subscribe, prompt_async, count
 * this session's text deltas until its `session.idle`.
 */
const serverTurn = async (base: string, directory: string, headers: Record<string, string>, session: string) => {
  const tally = new Tally()
  const query = `?directory=${encodeURIComponent(directory)}`
  const stream = await subscribe(`${base}/event${query}`, headers, (event) => {
    if (event.properties.sessionID !== session) return false
    if (event.type === "message.part.delta" && event.properties.field === "text") tally.delta(event.properties.delta ?? "")
    return event.type === "session.idle"
  })
  await post(`${base}/session/${session}/prompt_async${query}`, headers, { parts: [{ type: "text", text: prompt }] })
  await withTimeout(stream.done, turnTimeout, `${base} turn`)
  tally.link = stream.link
  return tally
}

// --- contenders ------------------------------------------------------------------

/** The real CLI's stdout, read directly. */
const rawPipe = (model: FakeModel.FakeModel["Type"]) =>
  Effect.gen(function*() {
    const dirs = yield* ClaudeCli.offlineDirs("skein-bench-serve-raw-")
    const cli = yield* Effect.orDie(ClaudeCli.executable)
    yield* model.enqueue(FakeModel.text(replyText))
    return yield* Effect.async<Tally, Error>((resume) => {
      const env: Record<string, string> = {}
      for (const [name, value] of Object.entries(ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: dirs.configDir, tmpDir: dirs.tmpDir }))) {
        if (value !== undefined) env[name] = value
      }
      for (const [name, value] of Object.entries(inherited())) {
        if (!(name in env)) env[name] = value
      }
      const child = ChildProcess.spawn(
        cli,
        ["-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages", "--bare", prompt],
        { cwd: dirs.cwd, env, stdio: ["ignore", "pipe", "pipe"] }
      )
      const tally = new Tally()
      Readline.createInterface({ input: child.stdout }).on("line", (line) => {
        if (!line.includes("\"text_delta\"")) return
        const message: { type?: string; event?: { type?: string; delta?: { type?: string; text?: string } } } = JSON.parse(line)
        if (message.type === "stream_event" && message.event?.delta?.type === "text_delta") tally.delta(message.event.delta.text ?? "")
      })
      let stderr = ""
      child.stderr.on("data", (chunk: Buffer) => {
        stderr = (stderr + chunk.toString("utf8")).slice(-2000)
      })
      child.on("close", (code) =>
        resume(code === 0 ? Effect.succeed(tally) : Effect.fail(new Error(`the CLI exited with ${code}: ${stderr}`)))
      )
      return Effect.sync(() => {
        if (child.exitCode === null && child.pid !== undefined) child.kill("SIGKILL")
      })
    })
  })

const sessionOf = (properties: unknown): unknown =>
  typeof properties === "object" && properties !== null && "sessionID" in properties ? properties.sessionID : undefined
const deltaOf = (properties: unknown): string =>
  typeof properties === "object" && properties !== null && "delta" in properties && typeof properties.delta === "string"
    ? properties.delta
    : ""

/**
 * skein serve, built as the serve tests' harness builds it, on the sliced
 * scheduler `skein serve` runs on (on Effect's own, its fibers and
 * FakeModel's held this event loop for hundreds of ms at a time). `via: "log"`
 * reads the measured turn from the server's event log in process instead of
 * over SSE: the same path up to the SSE edge, to tell the two apart.
 */
const skein = (model: FakeModel.FakeModel["Type"], via: "sse" | "log") =>
  Effect.gen(function*() {
    const dirs = yield* ClaudeCli.offlineDirs("skein-bench-serve-skein-")
    const layer = Serve.layer({
      token,
      roots: [dirs.cwd],
      configDir: dirs.configDir,
      stateDir: Path.join(dirs.root, "serve-state"),
      session: {
        env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: dirs.configDir, tmpDir: dirs.tmpDir }),
        bare: true,
        stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
      }
    }).pipe(
      Layer.provideMerge(NodeHttpServer.layer(() => Http.createServer(), { port: 0, host: "127.0.0.1" })),
      Layer.provideMerge(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))
    )
    const context = yield* Layer.build(layer)
    const address = Context.get(context, HttpServer.HttpServer).address
    const base = `http://127.0.0.1:${address._tag === "TcpAddress" ? address.port : 0}`
    const headers = { authorization: `Bearer ${token}` }
    const session = yield* Effect.promise(async () => {
      const session = idOf(await post(`${base}/session?directory=${encodeURIComponent(dirs.cwd)}`, headers, {}))
      await Effect.runPromise(model.enqueue(FakeModel.text("Warm.")))
      await serverTurn(base, dirs.cwd, headers, session)
      await Effect.runPromise(model.enqueue(FakeModel.text(replyText)))
      return session
    })
    if (via === "sse") return yield* Effect.promise(() => serverTurn(base, dirs.cwd, headers, session))
    const events = yield* Effect.provide(ServerEvents.ServerEvents, context)
    const tally = new Tally()
    const reader = yield* events.follow(yield* events.nextSeq).pipe(
      Stream.takeUntil(({ message }) => message.payload.type === "session.idle" && sessionOf(message.payload.properties) === session),
      Stream.runForEach(({ at, message }) =>
        Effect.sync(() => {
          // Stamped with the record's append time (epoch ms), not the follower's: the rate into the log.
          if (message.payload.type === "message.part.delta") tally.delta(deltaOf(message.payload.properties), at - performance.timeOrigin)
        })
      ),
      Effect.orDie,
      Effect.fork
    )
    yield* Effect.promise(() =>
      post(`${base}/session/${session}/prompt_async?directory=${encodeURIComponent(dirs.cwd)}`, headers, { parts: [{ type: "text", text: prompt }] })
    )
    yield* Fiber.join(reader)
    return tally
  }).pipe((effect) => Effect.withScheduler(effect, SlicedScheduler.make()))

const freePort = () =>
  Effect.async<number>((resume) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resume(Effect.succeed(port)))
    })
  })

/** Pids whose working directory is under `root`: what a spawned server and its CLIs left running. */
const processesUnder = (root: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").flatMap((name) => {
    if (!/^\d+$/.test(name)) return []
    try {
      return Fs.readlinkSync(`/proc/${name}/cwd`).startsWith(root) ? [Number(name)] : []
    } catch {
      return []
    }
  })

/** Waits for `child` to exit, up to `ms`. */
const exited = (child: ChildProcess.ChildProcess, ms: number) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    const timer = setTimeout(resolve, ms)
    child.once("close", () => {
      clearTimeout(timer)
      resolve()
    })
  })

/**
 * Spawns a server in its own process group, in `cwd`; at scope close SIGTERM
 * to the group, SIGKILL after 8 s, then SIGKILL to anything still running in
 * the run's folders (only what this bench started runs there).
 */
const spawnServer = (command: string, args: ReadonlyArray<string>, options: { readonly cwd: string; readonly env: Record<string, string>; readonly root: string }) =>
  Effect.acquireRelease(
    Effect.sync(() => ChildProcess.spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"], detached: true })),
    (child) =>
      Effect.promise(async () => {
        const group = (signal: NodeJS.Signals) => {
          try {
            if (child.pid !== undefined) process.kill(-child.pid, signal)
          } catch {
            // the group is gone already
          }
        }
        group("SIGTERM")
        await exited(child, 8_000)
        group("SIGKILL")
        await exited(child, 2_000)
        for (const pid of processesUnder(options.root)) process.kill(pid, "SIGKILL")
      })
  )

/** Resolves once the server prints `listening` (stdout or stderr); fails if it exits first. */
const listening = (child: ChildProcess.ChildProcessByStdio<null, Readable, Readable>, what: string) =>
  withTimeout(
    new Promise<void>((resolve, reject) => {
      let out = ""
      const look = (chunk: Buffer) => {
        out += chunk.toString("utf8")
        if (/listening/i.test(out)) resolve()
      }
      child.stdout.on("data", look)
      child.stderr.on("data", look)
      child.once("close", (code) => reject(new Error(`${what} exited with ${code}: ${out.slice(-2000)}`)))
    }),
    120_000,
    `${what} start`
  )

/**
 * skein serve in a process of its own (`examples/serve.ts`, as `skein serve`
 * runs it), its CLIs offline through the environment they inherit: the same
 * footing as opencode serve, which does not share the bench's event loop.
 */
const skeinProcess = (model: FakeModel.FakeModel["Type"]) =>
  Effect.gen(function*() {
    const dirs = yield* ClaudeCli.offlineDirs("skein-bench-serve-skeinp-")
    const port = yield* freePort()
    const env: Record<string, string> = { ...inherited(), ...ClaudeCli.offlineEnv({ baseUrl: model.url, configDir: dirs.configDir, tmpDir: dirs.tmpDir }), SKEIN_SERVER_TOKEN: token }
    // node itself, not tsx's wrapper: its pid is the server's, whose CPU the turn is measured in.
    const child = yield* spawnServer(process.execPath, [...serverNodeArgs, serveEntry, "--port", String(port), "--root", dirs.cwd], {
      cwd: dirs.cwd,
      env,
      root: dirs.root
    })
    const base = `http://127.0.0.1:${port}`
    const headers = { authorization: `Bearer ${token}` }
    return yield* Effect.promise(async () => {
      await listening(child, "skein serve")
      const session = idOf(await post(`${base}/session?directory=${encodeURIComponent(dirs.cwd)}`, headers, {}))
      await Effect.runPromise(model.enqueue(FakeModel.text("Warm.")))
      await serverTurn(base, dirs.cwd, headers, session)
      await Effect.runPromise(model.enqueue(FakeModel.text(replyText)))
      const cpu = cpuOf(child.pid!)
      const tally = await serverTurn(base, dirs.cwd, headers, session)
      processCpuMs = cpuOf(child.pid!) - cpu
      return tally
    })
  })

/** `opencode serve`, offline, its anthropic provider on FakeModel; killed by its pid when the scope closes. */
const opencode = (model: FakeModel.FakeModel["Type"]) =>
  Effect.gen(function*() {
    const dirs = yield* ClaudeCli.offlineDirs("skein-bench-serve-opencode-")
    const { env } = Opencode.offline({ root: dirs.root, cwd: dirs.cwd, modelUrl: model.url })
    const port = yield* freePort()
    const child = yield* spawnServer(Opencode.binary, ["serve", "--port", String(port), "--hostname", "127.0.0.1"], { cwd: dirs.cwd, env, root: dirs.root })
    const base = `http://127.0.0.1:${port}`
    return yield* Effect.promise(async () => {
      await listening(child, "opencode serve")
      const session = idOf(await post(`${base}/session?directory=${encodeURIComponent(dirs.cwd)}`, {}, {}))
      await Effect.runPromise(model.enqueue(FakeModel.text("Warm.")))
      await serverTurn(base, dirs.cwd, {}, session)
      await Effect.runPromise(model.enqueue(FakeModel.text(replyText)))
      return serverTurn(base, dirs.cwd, {}, session)
    })
  })

/**
 * The SSE reader of the fan-out row: what `subscribe` reads, without parsing
 * each frame's JSON (200 of them share this event loop): the delta's text is
 * found by its field, the turn's end by its type. Resolves once connected.
 */
const lightSubscribe = async (url: string, headers: Record<string, string>, session: string, tally: Tally) => {
  const controller = new AbortController()
  const response = await fetch(url, { headers: { ...headers, accept: "text/event-stream" }, signal: controller.signal })
  if (!response.ok || response.body === null) throw new Error(`GET ${url}: ${response.status}`)
  const reader = response.body.getReader()
  const done = (async () => {
    const decoder = new TextDecoder()
    let buffer = ""
    for (;;) {
      const { done, value } = await reader.read()
      if (done) throw new Error(`${url}: the stream ended before the turn did`)
      buffer += decoder.decode(value, { stream: true })
      const now = performance.now()
      let start = 0
      let end: number
      while ((end = buffer.indexOf("\n\n", start)) >= 0) {
        const frame = buffer.slice(start, end)
        start = end + 2
        if (frame.includes(`"message.part.delta"`) && frame.includes(session)) {
          const at = frame.indexOf(`"delta":"`) + 9
          tally.delta(frame.slice(at, frame.indexOf(`"`, at)), now)
        } else if (frame.includes(`"session.idle"`) && frame.includes(session)) {
          controller.abort()
          return
        }
      }
      buffer = buffer.slice(start)
    }
  })()
  return { done }
}

/** The server's own CPU so far (user + system), ms, from /proc (its CLIs are processes of their own). */
const cpuOf = (pid: number): number => {
  const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  // utime and stime are fields 14 and 15 of the line, in clock ticks (100 a second here).
  return (Number(fields[11]) + Number(fields[12])) * 10
}

interface Fanout {
  readonly clients: number
  readonly cpuMs: number
  /** Per client, sorted by p99 delay; the worst last. */
  readonly figures: ReadonlyArray<Figures>
  readonly wallMs: number
}

/**
 * The fan-out row: skein serve in a process of its own (node, so its pid is
 * the server's), one turn of `fanoutDeltas` read by one client, then the same
 * reply read by `fanoutClients` clients at once; the server's CPU for each
 * turn from /proc, and each client's figures.
 */
const fanout = (model: FakeModel.FakeModel["Type"]) =>
  Effect.gen(function*() {
    const dirs = yield* ClaudeCli.offlineDirs("skein-bench-serve-fanout-")
    const port = yield* freePort()
    const env: Record<string, string> = { ...inherited(), ...ClaudeCli.offlineEnv({ baseUrl: model.url, configDir: dirs.configDir, tmpDir: dirs.tmpDir }), SKEIN_SERVER_TOKEN: token }
    const child = yield* spawnServer(process.execPath, [
      ...(profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${Path.resolve(profileDir)}`]),
      ...serverNodeArgs, serveEntry, "--port", String(port), "--root", dirs.cwd], {
      cwd: dirs.cwd,
      env,
      root: dirs.root
    })
    const pid = child.pid!
    const base = `http://127.0.0.1:${port}`
    const headers = { authorization: `Bearer ${token}` }
    const fanoutReply = Array.from({ length: fanoutDeltas * 2 }, (_, i) => `w${i} `).join("")
    return yield* Effect.promise(async () => {
      await listening(child, "skein serve")
      console.error("fan-out: server listening")
      const session = idOf(await post(`${base}/session?directory=${encodeURIComponent(dirs.cwd)}`, headers, {}))
      await Effect.runPromise(model.enqueue(FakeModel.text("Warm.")))
      await serverTurn(base, dirs.cwd, headers, session)
      console.error("fan-out: warm")
      const query = `?directory=${encodeURIComponent(dirs.cwd)}`
      const turn = async (clients: number): Promise<Fanout> => {
        sentAt.fill(Number.NaN)
        await Effect.runPromise(model.enqueue(FakeModel.text(fanoutReply)))
        const tallies = Array.from({ length: clients }, () => new Tally())
        const reading = await Promise.all(tallies.map((tally) => lightSubscribe(`${base}/event${query}`, headers, session, tally)))
        const cpu = cpuOf(pid)
        const start = performance.now()
        await post(`${base}/session/${session}/prompt_async${query}`, headers, { parts: [{ type: "text", text: prompt }] })
        await withTimeout(Promise.all(reading.map((r) => r.done)), turnTimeout, `${clients} clients`)
        const wallMs = performance.now() - start
        const figures = tallies.map((tally) => figuresOf(`${clients} clients`, tally, fanoutDeltas, fanoutReply.length)).sort((a, b) => a.p99 - b.p99)
        return { clients, cpuMs: cpuOf(pid) - cpu, figures, wallMs }
      }
      const one = await turn(1)
      const many = await turn(fanoutClients)
      return { one, many }
    })
  })

// --- the run -------------------------------------------------------------------------

const main = Effect.gen(function*() {
  // FakeModel on the sliced scheduler too: on Effect's own it wrote the 100,000-delta reply in
  // runs of microtasks that held this event loop for up to half a second at a time, so every
  // reader here (the raw pipe's included) saw its frames late, in bursts.
  const fake = yield* Effect.withScheduler(FakeModel.make(), SlicedScheduler.make())
  // Every contender talks to the model through the stamping proxy; scripts go to FakeModel itself.
  const model: FakeModel.FakeModel["Type"] = { ...fake, url: yield* stampingProxy(fake.url) }
  const run = (name: string, contender: Effect.Effect<Tally, Error, Scope.Scope>) =>
    Effect.sync(() => {
      sentAt.fill(Number.NaN)
      ticking(true)
    }).pipe(
      Effect.zipRight(Effect.scoped(contender)),
      Effect.map((tally) => figures(name, tally)),
      Effect.ensuring(Effect.sync(() => ticking(false))),
      Effect.tap((f) => Effect.sync(() => console.error(`${name}: done (${f.frames} frames)`)))
    )
  const optional = (name: string, key: string, contender: Effect.Effect<Tally, Error, Scope.Scope>) =>
    runs(key) ? Effect.asSome(run(name, contender)) : Effect.succeedNone
  const raw = yield* optional("raw pipe", "raw", rawPipe(model))
  const served = yield* optional("skein serve", "skein", skein(model, "sse"))
  const logged = yield* optional("skein log", "log", skein(model, "log"))
  const apart = yield* optional("skein (process)", "process", skeinProcess(model))
  const reference = yield* optional("opencode serve", "opencode", opencode(model))
  const fanned = runs("fanout")
    ? Option.some(yield* Effect.scoped(fanout(model)).pipe(Effect.tap(() => Effect.sync(() => console.error("fan-out: done")))))
    : Option.none()

  console.log(`one streamed reply of ${deltas.toLocaleString("en")} text deltas (${(replyText.length / 1e6).toFixed(1)} MB of text), FakeModel, real CLI`)
  for (const f of [raw, served, apart, reference, logged].flatMap(Option.toArray)) {
    console.log(
      `${f.name.padEnd(15)} ${f.perSecond.toFixed(0).padStart(7)} deltas/s (burst ${f.burst.toFixed(0).padStart(6)}/s)  ${String(f.frames).padStart(6)} frames  ` +
        `delay p50 ${f.p50.toFixed(1).padStart(7)} ms  p99 ${f.p99.toFixed(1).padStart(7)} ms  max ${f.max.toFixed(0).padStart(6)} ms  ` +
        `frame gap p99 ${f.gapP99.toFixed(1).padStart(6)} ms  reader's loop held ${f.readerStall.toFixed(0).padStart(4)} ms at most  ` +
        `${f.complete ? "complete" : "INCOMPLETE text"}` +
        (f.link.reconnects + f.link.resyncs > 0 ? `  (${f.link.reconnects} reconnects, ${f.link.resyncs} resyncs)` : "")
    )
  }
  const met = (ok: boolean) => (ok ? "met" : "NOT MET")
  const check = (label: string, ratio: number, target: number) =>
    console.log(`${label.padEnd(27)} ${ratio.toFixed(2)}x  (target >= ${target}x, ${met(ratio >= target)})`)
  const both = <A, B>(a: Option.Option<A>, b: Option.Option<B>, f: (a: A, b: B) => void) => {
    if (Option.isSome(a) && Option.isSome(b)) f(a.value, b.value)
  }
  both(served, reference, (s, r) => check("skein / opencode", s.perSecond / r.perSecond, 2))
  both(served, raw, (s, r) => check("skein / raw pipe", s.perSecond / r.perSecond, 0.9))
  both(apart, reference, (s, r) => check("skein (process) / opencode", s.perSecond / r.perSecond, 2))
  both(apart, raw, (s, r) => check("skein (process) / raw", s.perSecond / r.perSecond, 0.9))
  if (Option.isSome(apart) && !Number.isNaN(processCpuMs)) {
    console.log(`skein (process) server CPU ${processCpuMs.toFixed(0)} ms for the turn: ${(processCpuMs * 1000 / deltas).toFixed(1)} us per delta`)
  }
  both(served, logged, (s, l) =>
    console.log(`skein serve / skein log ${(s.perSecond / l.perSecond).toFixed(2)}x: what the SSE edge keeps of the rate into the log (appends timed in ms)`))
  both(served, reference, (s, r) => console.log(`p99 delay skein / opencode ${(s.p99 / r.p99).toFixed(2)}x (lower is better)`))
  both(served, raw, (s, r) =>
    console.log(`p99 delay skein / raw pipe ${(s.p99 / r.p99).toFixed(2)}x  (target <= 1.15x, ${met(s.p99 / r.p99 <= 1.15)})`))
  for (const f of [served, apart].flatMap(Option.toArray)) {
    console.log(`${f.name} frame gap p99 ${f.gapP99.toFixed(1)} ms  (target <= 100 ms, ${met(f.gapP99 <= 100)})`)
  }
  if (Option.isSome(fanned)) {
    const { many, one } = fanned.value
    console.log(`fan-out: skein serve (process), one reply of ${fanoutDeltas.toLocaleString("en")} deltas, read by 1 client, then by ${many.clients}`)
    for (const run of [one, many]) {
      const worst = run.figures[run.figures.length - 1]!
      const median = run.figures[Math.floor(run.figures.length / 2)]!
      const complete = run.figures.filter((f) => f.complete).length
      console.log(
        `  ${String(run.clients).padStart(3)} client(s): server CPU ${run.cpuMs.toFixed(0).padStart(6)} ms  turn ${run.wallMs.toFixed(0).padStart(6)} ms  ` +
          `p99 delay median ${median.p99.toFixed(1)} ms, worst ${worst.p99.toFixed(1)} ms  frames median ${median.frames}  ` +
          `frame gap p99 worst ${Math.max(...run.figures.map((f) => f.gapP99)).toFixed(1)} ms  ${complete}/${run.clients} complete`
      )
    }
    const cpuRatio = many.cpuMs / one.cpuMs
    const delayRatio = many.figures[many.figures.length - 1]!.p99 / one.figures[0]!.p99
    console.log(`fan-out server CPU ${many.clients} / 1 clients ${cpuRatio.toFixed(2)}x  (target <= 3x, ${met(cpuRatio <= 3)})`)
    console.log(`fan-out worst client's p99 delay / one client's ${delayRatio.toFixed(2)}x  (target <= 1.5x, ${met(delayRatio <= 1.5)})`)
  }
})

await Effect.runPromise(Effect.scoped(main).pipe(Effect.orDie))
process.exit(0)
