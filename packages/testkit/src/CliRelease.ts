/**
 * Another release of the Claude Code CLI than the pinned one, installed on
 * demand with npm into a cache under the OS temp folder, so tests can run the
 * session core against an older release (the 2.0 line prints no
 * `session_state_changed` and no `task_*` events).
 *
 * Each release is installed once per machine: npm installs into a private
 * staging folder, which is then renamed into place. A rename onto a finished
 * install fails, so concurrent test workers never see half an install, and
 * the loser of a race just uses the winner's.
 *
 * @since 0.0.0
 */
import { Effect, Schema } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/**
 * The older release tests run against: the last of the 2.0 line.
 *
 * @since 0.0.0
 */
export const defaultVersion = "2.0.76"

const packageName = "@anthropic-ai/claude-code"

/**
 * How to run one installed release: spawn `command` with `args` first, then
 * the CLI's own flags.
 *
 * @since 0.0.0
 */
export interface CliRelease {
  readonly version: string
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** The installed package folder. */
  readonly packageDir: string
}

/**
 * npm could not install the release, or the installed package has no runnable entry.
 *
 * @since 0.0.0
 */
export class CliReleaseInstallError extends Schema.TaggedError<CliReleaseInstallError>()("CliReleaseInstallError", {
  version: Schema.String,
  message: Schema.String
}) {}

/**
 * The cache folder: one subfolder per version.
 *
 * @since 0.0.0
 */
export const cacheRoot = (): string => Path.join(Os.tmpdir(), `skein-cli-releases-${Os.userInfo().uid}`)

const packageDirOf = (prefix: string) => Path.join(prefix, "node_modules", ...packageName.split("/"))

const Manifest = Schema.parseJson(Schema.Struct({
  version: Schema.String,
  bin: Schema.Union(Schema.String, Schema.Record({ key: Schema.String, value: Schema.String }))
}))

/** The release in `prefix`, if a finished install of `version` is there. */
const readInstalled = (prefix: string, version: string) =>
  Effect.gen(function*() {
    const packageDir = packageDirOf(prefix)
    const text = yield* Effect.try(() => Fs.readFileSync(Path.join(packageDir, "package.json"), "utf8"))
    const manifest = yield* Schema.decodeUnknown(Manifest)(text)
    if (manifest.version !== version) return yield* Effect.fail(`found ${manifest.version}`)
    const bin = typeof manifest.bin === "string" ? manifest.bin : manifest.bin.claude
    if (bin === undefined) return yield* Effect.fail("no claude bin")
    const entry = Path.join(packageDir, bin)
    if (!Fs.existsSync(entry)) return yield* Effect.fail(`${entry} is missing`)
    // The 2.0 line ships a node script; later lines a native executable.
    const release: CliRelease = /\.[cm]?js$/.test(entry)
      ? { version, command: process.execPath, args: [entry], packageDir }
      : { version, command: entry, args: [], packageDir }
    return release
  }).pipe(Effect.option)

const npmInstall = (prefix: string, version: string) =>
  Effect.async<void, CliReleaseInstallError>((resume) => {
    const child = ChildProcess.execFile(
      "npm",
      [
        "install",
        "--prefix",
        prefix,
        "--no-save",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        `${packageName}@${version}`
      ],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, _stdout, stderr) =>
        resume(
          error === null
            ? Effect.void
            : Effect.fail(new CliReleaseInstallError({ version, message: `npm install failed: ${stderr || error.message}` }))
        )
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/**
 * @since 0.0.0
 */
export interface InstallOptions {
  /** Where installs are cached; {@link cacheRoot} if omitted. */
  readonly cacheDir?: string | undefined
}

/**
 * The release `version` (default {@link defaultVersion}), installed into
 * the cache on first use. The first call on a machine takes a few seconds and
 * needs the npm registry; later calls only read the manifest.
 *
 * @since 0.0.0
 */
export const install: (
  version?: string,
  options?: InstallOptions
) => Effect.Effect<CliRelease, CliReleaseInstallError> = Effect.fn("CliRelease.install")(function*(
  version: string = defaultVersion,
  options?: InstallOptions
) {
  const root = options?.cacheDir ?? cacheRoot()
  const target = Path.join(root, version)
  const cached = yield* readInstalled(target, version)
  if (cached._tag === "Some") return cached.value

  yield* Effect.sync(() => Fs.mkdirSync(root, { recursive: true }))
  const staging = yield* Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(root, `.${version}-staging-`))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
  yield* Effect.logInfo(`installing ${packageName}@${version} into ${target}`)
  yield* npmInstall(staging, version)
  const staged = yield* readInstalled(staging, version)
  if (staged._tag === "None") {
    return yield* new CliReleaseInstallError({ version, message: `npm installed no runnable ${packageName}@${version}` })
  }
  // Fails if another worker finished first (or a stale broken install is there): then look again.
  yield* Effect.sync(() => {
    try {
      Fs.renameSync(staging, target)
    } catch {
      // handled below
    }
  })
  const installed = yield* readInstalled(target, version)
  if (installed._tag === "Some") return installed.value
  return yield* new CliReleaseInstallError({
    version,
    message: `${target} exists but holds no finished install of ${version}; remove it and retry`
  })
}, Effect.scoped)
