/**
 * The packages as a user installs them: `npm run build`, `npm pack` every
 * workspace, install the tarballs into a fresh Node project (no TypeScript,
 * no tsx, no @skein/source condition), then
 * - a plain .mjs embeds skein through Skein.layerConfig and runs one turn of
 *   the real CLI against the packed testkit's FakeModel, answering its
 *   permission ask;
 * - the packed `skein` bin runs `run --fake-model` from dist/.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli } from "@skein/testkit"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { run } from "./support/command.js"

const repo = Path.resolve(import.meta.dirname, "..")
const packages = ["acp", "canonical", "cli", "cluster", "compact", "kernel", "memory", "pipeline", "protocol", "runtime", "serve", "session", "sql", "store", "testkit"]

/** The environment of a user's shell: no source condition, no npm config inherited from the repository's run. */
const userEnv = (extra: Record<string, string> = {}): Record<string, string> => ({
  ...Object.fromEntries(
    Object.entries(process.env).flatMap(([k, v]) =>
      v === undefined || k === "NODE_OPTIONS" || k.startsWith("npm_") || k === "VITEST" ? [] : [[k, v]]
    )
  ),
  ...extra
})

/** Runs to exit 0, or fails the test with the command's output. */
const ok = (command: string, args: ReadonlyArray<string>, options: { readonly cwd: string; readonly env: Record<string, string> }) =>
  Effect.flatMap(run(command, args, options), (ran) =>
    ran.code === 0
      ? Effect.succeed(ran)
      : Effect.dieMessage(`${command} ${args.join(" ")} exited ${ran.code}\n${ran.stdout.slice(-2000)}\n${ran.stderr.slice(-2000)}`))

const Packed = Schema.parseJson(Schema.Array(Schema.Struct({
  name: Schema.String,
  filename: Schema.String,
  files: Schema.Array(Schema.Struct({ path: Schema.String }))
})))

const Embedded = Schema.parseJson(Schema.Struct({
  text: Schema.String,
  file: Schema.String,
  journal: Schema.Boolean,
  resolved: Schema.String
}))

const tempRoot = Effect.acquireRelease(
  Effect.sync(() => Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-pack-")))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** Pids of live processes whose working folder is inside `dir`. */
const processesIn = (dir: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).flatMap((name) => {
    try {
      return Fs.readlinkSync(`/proc/${name}/cwd`).startsWith(`${dir}/`) ? [Number(name)] : []
    } catch {
      return []
    }
  })

describe("the packed packages", () => {
  it.scopedLive("install into a plain Node project and run a real-CLI turn against the packed FakeModel", () =>
    Effect.gen(function*() {
      const claude = yield* ClaudeCli.executable
      const root = yield* tempRoot
      const folder = (name: string) => {
        const dir = Path.join(root, name)
        Fs.mkdirSync(dir)
        return dir
      }
      const tarballs = folder("tarballs")
      const app = folder("app")
      const work = folder("work")
      const cliWork = folder("cli-work")

      yield* ok("npm", ["run", "build"], { cwd: repo, env: userEnv() })
      const packed = yield* Schema.decode(Packed)(
        (yield* ok("npm", ["pack", "--workspaces", "--pack-destination", tarballs, "--json"], { cwd: repo, env: userEnv() })).stdout
      )
      expect(packed.map((p) => p.name).sort()).toEqual(packages.map((name) => `@skein/${name}`))
      for (const p of packed) {
        const files = p.files.map((f) => f.path)
        expect(files, p.name).toContain("dist/index.js")
        expect(files, p.name).toContain("dist/index.d.ts")
        expect(files, p.name).toContain("dist/index.js.map")
        expect(files.some((f) => f.includes(".tsbuildinfo")), p.name).toBe(false)
      }

      Fs.writeFileSync(Path.join(app, "package.json"), JSON.stringify({ name: "skein-pack-check", private: true, type: "module" }))
      yield* ok(
        "npm",
        ["install", "--prefer-offline", "--no-audit", "--no-fund", ...packed.map((p) => Path.join(tarballs, p.filename)), "effect@3.22.4"],
        { cwd: app, env: userEnv() }
      )
      expect(Fs.existsSync(Path.join(app, "node_modules", "typescript"))).toBe(false)
      expect(Fs.existsSync(Path.join(app, "node_modules", "tsx"))).toBe(false)

      const script = Path.join(app, "embed.mjs")
      Fs.copyFileSync(Path.join(repo, "test", "fixtures", "pack-embed.mjs"), script)
      const embedded = yield* ok(process.execPath, [script], {
        cwd: work,
        env: userEnv({ CLAUDE_CONFIG_DIR: Path.join(root, "config"), SKEIN_ROOT: Path.join(root, "state"), SKEIN_CLAUDE: claude })
      })
      const out = yield* Schema.decode(Embedded)(embedded.stdout.trim())
      expect(out).toEqual({
        text: "Hello from the packed install.",
        file: "packed",
        journal: true,
        resolved: `file://${app}/node_modules/@skein/session/dist/index.js`
      })

      const bin = Path.join(app, "node_modules", ".bin", "skein")
      const turn = yield* ok(bin, ["run", "--fake-model", "--claude", claude, "hi"], {
        cwd: cliWork,
        env: userEnv({ NO_COLOR: "1" })
      })
      expect(turn.stdout).toContain("skein's fake model")
      expect(processesIn(root)).toEqual([])
    }), 360_000)
})
