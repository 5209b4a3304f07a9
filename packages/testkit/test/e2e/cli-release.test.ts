import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ClaudeCli from "../../src/ClaudeCli.js"
import * as CliRelease from "../../src/CliRelease.js"
import * as FakeModel from "../../src/FakeModel.js"

const parse = (line: string): Record<string, unknown> => {
  const value: unknown = JSON.parse(line)
  return value !== null && typeof value === "object" ? { ...value } : {}
}

const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-cli-release-test-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

describe("CliRelease", () => {
  it.live("installs the default release once and says how to run it", () =>
    Effect.gen(function*() {
      const release = yield* CliRelease.install()
      expect(release.version).toBe(CliRelease.defaultVersion)
      // The 2.0 line is a node script.
      expect(release.command).toBe(process.execPath)
      expect(release.args).toHaveLength(1)
      expect(release.args[0]!.endsWith("cli.js")).toBe(true)
      expect(Fs.existsSync(release.args[0]!)).toBe(true)
      expect(release.packageDir.startsWith(Path.join(CliRelease.cacheRoot(), release.version))).toBe(true)
      expect(yield* CliRelease.install(release.version)).toEqual(release)
    }), 180_000)

  it.scopedLive("concurrent installs into an empty cache agree on one finished install", () =>
    Effect.gen(function*() {
      const cacheDir = yield* tempDir
      const installs = yield* Effect.all(
        Array.from({ length: 3 }, () => CliRelease.install(CliRelease.defaultVersion, { cacheDir })),
        { concurrency: "unbounded" }
      )
      expect(new Set(installs.map((release) => release.packageDir)).size).toBe(1)
      // No staging folder is left behind, whoever won the race.
      expect(Fs.readdirSync(cacheDir)).toEqual([CliRelease.defaultVersion])
      expect(Fs.existsSync(installs[0]!.args[0]!)).toBe(true)
    }), 180_000)

  it.scopedLive("a version npm does not have fails with CliReleaseInstallError", () =>
    Effect.gen(function*() {
      const cacheDir = yield* tempDir
      const error = yield* Effect.flip(CliRelease.install("0.0.0-skein-no-such-release", { cacheDir }))
      expect(error._tag).toBe("CliReleaseInstallError")
      expect(error.message).toContain("npm install failed")
      expect(Fs.readdirSync(cacheDir)).toEqual([])
    }), 180_000)

  it.scopedLive("the old release runs one offline turn against FakeModel", () =>
    Effect.gen(function*() {
      const release = yield* CliRelease.install()
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Hello from the fake model to an old CLI.")] })
      // The 2.0 line has no --bare.
      const turn = yield* ClaudeCli.runTurn({ baseUrl: model.url, prompt: "Say hello", release, args: [] })
      expect(turn.exitCode).toBe(0)
      const conversation = yield* model.awaitRequest(0, FakeModel.isConversation)
      expect(FakeModel.messagesText(conversation)).toContain("Say hello")

      const messages = turn.lines.map(parse)
      const init = messages.find((m) => m.type === "system" && m.subtype === "init")
      expect(init).toMatchObject({ claude_code_version: release.version })
      expect(messages.find((m) => m.type === "result")).toMatchObject({
        subtype: "success",
        result: "Hello from the fake model to an old CLI."
      })
      // What a host must not rely on: the 2.0 line prints no session state.
      expect(messages.filter((m) => m.subtype === "session_state_changed")).toEqual([])
    }), 180_000)
})
