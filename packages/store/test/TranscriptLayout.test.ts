import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import * as ClaudeCli from "@skein/testkit/ClaudeCli"
import * as FakeModel from "@skein/testkit/FakeModel"
import { ConfigProvider, Effect, Layer, Option } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"

describe("TranscriptLayout", () => {
  it("sanitizes every UTF-16 code unit outside [A-Za-z0-9], and hashes past 200 characters", () => {
    expect(TranscriptLayout.sanitize("/home/dev/my project.v2")).toBe("-home-dev-my-project-v2")
    // Lossy: these share a folder.
    expect(TranscriptLayout.sanitize("/a-b")).toBe(TranscriptLayout.sanitize("/a/b"))
    // An astral character is two code units, so two dashes.
    expect(TranscriptLayout.sanitize("/e\u{1F600}x")).toBe("-e--x")
    const exact = `/${"p".repeat(199)}`
    expect(TranscriptLayout.sanitize(exact)).toBe(`-${"p".repeat(199)}`)
    // Folder names the real CLI 2.1.332 produced for these cwds.
    expect(TranscriptLayout.sanitize(`/tmp/tx/c2/${"q".repeat(190)}`)).toBe(`-tmp-tx-c2-${"q".repeat(189)}-yjk55o`)
    expect(TranscriptLayout.sanitize(`/tmp/tx/c2/${"n".repeat(200)}-10`)).toBe(`-tmp-tx-c2-${"n".repeat(189)}-dxi7cg`)
  })

  it("lays out a session's files", () => {
    const layout = TranscriptLayout.make("/cfg")
    const paths = layout.session("/w/p", "sid")
    expect(paths).toMatchObject({
      projectDir: "/cfg/projects/-w-p",
      transcript: "/cfg/projects/-w-p/sid.jsonl",
      sessionDir: "/cfg/projects/-w-p/sid",
      subagentsDir: "/cfg/projects/-w-p/sid/subagents",
      remoteAgentsDir: "/cfg/projects/-w-p/sid/remote-agents",
      sessionMemorySummary: "/cfg/projects/-w-p/sid/session-memory/summary.md"
    })
    expect(paths.subagent("a7")).toEqual({
      agentId: "a7",
      transcript: "/cfg/projects/-w-p/sid/subagents/agent-a7.jsonl",
      meta: "/cfg/projects/-w-p/sid/subagents/agent-a7.meta.json"
    })
    expect(TranscriptLayout.sessionIdOfFile("sid.jsonl")).toEqual(Option.some("sid"))
    expect(TranscriptLayout.agentIdOfFile("agent-a7.jsonl")).toEqual(Option.some("a7"))
    expect(TranscriptLayout.agentIdOfFile("agent-a7.meta.json")).toEqual(Option.none())
  })

  it.effect("takes the root from CLAUDE_CONFIG_DIR, else ~/.claude", () =>
    Effect.gen(function*() {
      const set = yield* TranscriptLayout.rootConfig.pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["CLAUDE_CONFIG_DIR", "/x/cfg"]])))
      )
      expect(set).toBe("/x/cfg")
      const unset = yield* TranscriptLayout.rootConfig.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))
      expect(unset.endsWith(`${Path.sep}.claude`)).toBe(true)
    }))

  it.scopedLive("matches the folders the real CLI creates, and checks the recorded cwd", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const model = yield* FakeModel.make()
      const executable = yield* ClaudeCli.executable
      const base = yield* fs.makeTempDirectoryScoped({ prefix: "skein-layout-" })
      const configDir = Path.join(base, "config")
      yield* fs.makeDirectory(configDir)
      const real = Path.join(base, "real dir")
      yield* fs.makeDirectory(real)
      yield* fs.symlink(real, Path.join(base, "link"))
      const cwds = [
        // Over 200 characters: cut and hashed.
        Path.join(base, "L".repeat(90), "\u03a9".repeat(60), "z".repeat(80)),
        Path.join(base, "odd name.v2_\u00fc\u00f1\u00ee-\u540d\u{1F600}"),
        // Through a symlink: the CLI names the folder after the physical path.
        Path.join(base, "link")
      ]
      for (const cwd of cwds) {
        yield* fs.makeDirectory(cwd, { recursive: true })
        const env = {
          PATH: process.env.PATH ?? "/usr/bin:/bin",
          HOME: process.env.HOME ?? base,
          ...ClaudeCli.offlineEnv({ baseUrl: model.url, configDir, tmpDir: base })
        }
        const exitCode = yield* Effect.async<number | null>((resume) => {
          const child = ChildProcess.execFile(
            executable,
            ["-p", `hello from ${Path.basename(cwd).slice(0, 10)}`, "--bare"],
            { cwd, env, timeout: 60_000 },
            () => resume(Effect.succeed(child.exitCode))
          )
        })
        expect(exitCode).toBe(0)
      }

      const layout = TranscriptLayout.make(configDir)
      const folders = (yield* fs.readDirectory(layout.projectsDir)).sort()
      const canonical = yield* Effect.forEach(cwds, TranscriptLayout.canonicalCwd)
      expect(folders).toEqual(canonical.map(TranscriptLayout.sanitize).sort())
      expect(folders.some((name) => name.length > TranscriptLayout.maxSanitizedLength)).toBe(true)

      const index = yield* SessionIndex.make.pipe(Effect.provide(TranscriptLayout.layer(configDir)))
      for (const cwd of canonical) {
        const sessions = yield* index.list({ cwd })
        expect(sessions).toHaveLength(1)
        const session = sessions[0]!
        expect(session).toMatchObject({ cwd, live: false, messageCount: 2, titleSource: "first-prompt" })
        expect(session.firstPrompt?.startsWith("hello from")).toBe(true)
        expect(yield* TranscriptLayout.checkCwd(session.path, cwd)).toEqual({ _tag: "Match", cwd })
        // Another directory with the same folder name is told apart by the entries.
        const twin = cwd.replace(/ /g, "/")
        if (twin !== cwd) {
          expect(TranscriptLayout.sanitize(twin)).toBe(TranscriptLayout.sanitize(cwd))
          expect(yield* TranscriptLayout.checkCwd(session.path, twin)).toEqual({ _tag: "Mismatch", expected: twin, found: cwd })
        }
        // What the real CLI wrote decodes without a single malformed line.
        const read = yield* TranscriptStore.read(session.path)
        expect(read.diagnostics).toEqual([])
        expect(read.entries.map((entry) => entry.type)).toContain("last-prompt")
        const tail = yield* TranscriptStore.tailScan(session.path)
        expect(tail.lastPrompt).toBe(session.firstPrompt)
        expect(tail.costState).toBeDefined()
      }
    }).pipe(Effect.provide(Layer.mergeAll(NodeContext.layer))), { timeout: 120_000 })
})
