/**
 * A throwaway Postgres cluster for tests: Debian's `postgresql` binaries,
 * `initdb` into a temp data dir, `pg_ctl start` on 127.0.0.1 and a free
 * port, stopped and deleted when the scope closes.
 *
 * `initdb` and `pg_ctl` refuse to run as root, so as root they run as the
 * `postgres` user (through `runuser`) over a data dir that user owns. A
 * cluster that cannot start fails with `PostgresUnavailable` and its log:
 * tests that need Postgres fail loudly rather than skip.
 *
 * @since 0.0.0
 */
import { Data, Effect, Redacted } from "effect"
import type { Scope } from "effect"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

/**
 * The binaries are missing or the cluster did not start.
 *
 * @since 0.0.0
 */
export class PostgresUnavailable extends Data.TaggedError("PostgresUnavailable")<{
  readonly message: string
}> {}

/**
 * A running cluster.
 *
 * @since 0.0.0
 */
export interface Postgres {
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres`, redacted. */
  readonly url: Redacted.Redacted<string>
  readonly port: number
  readonly password: string
  readonly dataDir: string
  /** Creates a fresh database and returns its URL, so tests sharing a cluster do not see each other's rows. */
  readonly database: (name: string) => Effect.Effect<Redacted.Redacted<string>, PostgresUnavailable>
  /** Stops the server (as a crash would, `-m immediate`); `start` brings it back on the same port. */
  readonly stop: Effect.Effect<void, PostgresUnavailable>
  readonly start: Effect.Effect<void, PostgresUnavailable>
}

export interface Options {
  /** The folder with `initdb` and `pg_ctl`. Default: `SKEIN_PG_BIN`, else the newest `/usr/lib/postgresql/<v>/bin`. */
  readonly binDir?: string | undefined
}

const run = (file: string, args: ReadonlyArray<string>, asPostgres: boolean) =>
  Effect.async<string, PostgresUnavailable>((resume) => {
    const [cmd, argv] = asPostgres ? ["runuser", ["-u", "postgres", "--", file, ...args]] : [file, [...args]]
    const child = execFile(cmd, argv, { cwd: os.tmpdir(), timeout: 60_000 }, (error, stdout, stderr) => {
      if (error === null) resume(Effect.succeed(stdout))
      else resume(Effect.fail(new PostgresUnavailable({ message: `${path.basename(file)} ${args.join(" ")}: ${error.message}\n${stderr}` })))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const findBinDir = (options: Options): Effect.Effect<string, PostgresUnavailable> =>
  Effect.suspend(() => {
    const given = options.binDir ?? process.env["SKEIN_PG_BIN"]
    if (given !== undefined) return Effect.succeed(given)
    const root = "/usr/lib/postgresql"
    const versions = fs.existsSync(root)
      ? fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, "bin", "pg_ctl"))).sort((a, b) => Number(b) - Number(a))
      : []
    const newest = versions[0]
    return newest === undefined
      ? Effect.fail(new PostgresUnavailable({ message: `no Postgres under ${root}: install Debian's postgresql package (.ci/run does)` }))
      : Effect.succeed(path.join(root, newest, "bin"))
  })

const freePort = Effect.async<number>((resume) => {
  const server = net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** The uid and gid of `postgres`, read from /etc/passwd, when we are root. */
const postgresUser = (): { readonly uid: number; readonly gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined
  const line = fs.readFileSync("/etc/passwd", "utf8").split("\n").find((l) => l.startsWith("postgres:"))
  const fields = line?.split(":")
  return fields === undefined ? undefined : { uid: Number(fields[2]), gid: Number(fields[3]) }
}

/**
 * Starts a cluster in the current scope.
 *
 * @since 0.0.0
 */
export const start = (options: Options = {}): Effect.Effect<Postgres, PostgresUnavailable, Scope.Scope> =>
  Effect.gen(function*() {
    const bin = yield* findBinDir(options)
    const owner = postgresUser()
    const asPostgres = owner !== undefined
    const base = yield* Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "skein-pg-"))),
      (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
    )
    const dataDir = path.join(base, "data")
    const password = `pw-${Math.random().toString(36).slice(2, 10)}`
    const pwfile = path.join(base, "pwfile")
    fs.writeFileSync(pwfile, password, { mode: 0o600 })
    if (owner !== undefined) {
      fs.chownSync(base, owner.uid, owner.gid)
      fs.chownSync(pwfile, owner.uid, owner.gid)
    }
    yield* run(path.join(bin, "initdb"), [
      "-D", dataDir, "-U", "postgres", "--pwfile", pwfile, "--auth-host=scram-sha-256", "--auth-local=trust",
      "-E", "UTF8", "--no-sync"
    ], asPostgres)
    const port = yield* freePort
    const pgCtl = path.join(bin, "pg_ctl")
    const logFile = path.join(base, "server.log")
    const startServer = run(pgCtl, [
      "start", "-D", dataDir, "-w", "-t", "60", "-l", logFile,
      "-o", `-h 127.0.0.1 -p ${port} -k ${base} -c fsync=off -c full_page_writes=off`
    ], asPostgres).pipe(
      Effect.mapError((e) => {
        const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, "utf8") : ""
        return new PostgresUnavailable({ message: `${e.message}\n${log}` })
      }),
      Effect.asVoid
    )
    const stopServer = (mode: "fast" | "immediate") =>
      run(pgCtl, ["stop", "-D", dataDir, "-m", mode, "-w", "-t", "60"], asPostgres).pipe(Effect.asVoid)
    yield* Effect.acquireRelease(startServer, () => Effect.ignore(stopServer("immediate")))
    const urlOf = (db: string) => `postgres://postgres:${password}@127.0.0.1:${port}/${db}`
    const psql = path.join(bin, "psql")
    return {
      url: Redacted.make(urlOf("postgres")),
      port,
      password,
      dataDir,
      database: (name) =>
        run(psql, ["-h", base, "-p", String(port), "-U", "postgres", "-d", "postgres", "-c", `CREATE DATABASE "${name}"`], asPostgres).pipe(
          Effect.as(Redacted.make(urlOf(name)))
        ),
      stop: stopServer("immediate"),
      start: startServer
    }
  })
