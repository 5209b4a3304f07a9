/**
 * The embedding snippet of README.md, run as it is printed: the first `ts`
 * block under "## Embedding" is written to a file and run by Node (tsx, from
 * sources) in a folder of its own, against FakeModel and the real CLI. Its
 * environment is a user's with the CLI pointed at FakeModel: the snippet
 * itself holds no test plumbing.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel, TsChild } from "@skein/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { run } from "./support/command.js"

const repo = Path.resolve(import.meta.dirname, "..")

/** The first ```ts block after the `## Embedding` heading. */
const embeddingSnippet = (readme: string): string => {
  const section = readme.split(/^## /m).find((part) => part.startsWith("Embedding"))
  const code = section?.match(/```ts\n([\s\S]*?)```/)?.[1]
  if (code === undefined) throw new Error("README.md has no ```ts block under ## Embedding")
  return code
}

/** The file is written inside the repository (`.tmp/`, ignored by git) so its imports resolve as the README's reader's would. */
const snippetFile = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = Path.join(repo, ".tmp")
    Fs.mkdirSync(dir, { recursive: true })
    const file = Path.join(dir, `readme-snippet-${process.pid}.ts`)
    Fs.writeFileSync(file, embeddingSnippet(Fs.readFileSync(Path.join(repo, "README.md"), "utf8")))
    return file
  }),
  (file) => Effect.sync(() => Fs.rmSync(file, { force: true }))
)

const spawnEnv = (vars: Readonly<Record<string, string | undefined>>): Record<string, string> =>
  Object.fromEntries(Object.entries({ ...process.env, ...vars }).flatMap(([k, v]) => (v === undefined ? [] : [[k, v]])))

describe("README.md", () => {
  it("has one embedding snippet of about fifteen lines", () => {
    const lines = embeddingSnippet(Fs.readFileSync(Path.join(repo, "README.md"), "utf8")).trim().split("\n")
    expect(lines.length).toBeGreaterThan(10)
    expect(lines.length).toBeLessThanOrEqual(22)
  })

  it("states the Node version the pinned Claude Code CLI declares, next to skein's own", () => {
    const readme = Fs.readFileSync(Path.join(repo, "README.md"), "utf8")
    const cli: { readonly version: string; readonly engines: { readonly node: string } } = JSON.parse(
      Fs.readFileSync(Path.join(repo, "node_modules", "@anthropic-ai", "claude-code", "package.json"), "utf8")
    )
    const declared = cli.engines.node.replace(/\.0\.0$/, "").replace(">=", ">= ")
    expect(readme).toContain(`(${cli.version}) declares \`node ${declared}\``)
    const root: { readonly engines: { readonly node: string } } = JSON.parse(Fs.readFileSync(Path.join(repo, "package.json"), "utf8"))
    expect(readme).toContain(`Node ${root.engines.node.replace(">=", "")} or later`)
    expect(readme).toContain("`EBADENGINE` warning")
  })

  it("says how opencode's clients pass the token (OPENCODE_SERVER_PASSWORD) and that /doc/ui needs the dashboard's cookie or a header", () => {
    const readme = Fs.readFileSync(Path.join(repo, "README.md"), "utf8")
    expect(readme).toMatch(/OPENCODE_SERVER_PASSWORD=<token> opencode run --attach/)
    expect(readme).toMatch(/`\/doc\/ui` are behind the\s+token too/)
    expect(readme).toMatch(/\?token=<token>`\s+\(it sets the cookie/)
  })

  it.scopedLive("its embedding snippet runs: a turn's text streamed, a permission answered, a worker forked", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.toolUse("Bash", { command: "ls -a > listing.txt" }),
          FakeModel.text("Two files here."),
          FakeModel.text("Looks fine.")
        ]
      })
      const d = yield* ClaudeCli.offlineDirs("skein-readme-")
      const file = yield* snippetFile
      const env = spawnEnv({
        ...ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
        SKEIN_ROOT: Path.join(d.root, "state")
      })
      const ran = yield* run(process.execPath, [...TsChild.nodeArgs(file, "tsx")], { cwd: d.cwd, env })
      expect(ran.stderr).toBe("")
      expect(ran.code).toBe(0)
      expect(ran.stdout).toBe("Two files here.\nworker: Looks fine.\n")
      // Bash was allowed by the snippet's policy, so the CLI ran it.
      expect(Fs.existsSync(Path.join(d.cwd, "listing.txt"))).toBe(true)
      const asked = (yield* model.requests).filter(FakeModel.isConversation).map(FakeModel.messagesText)
      expect(asked.some((text) => text.includes("Review what you found"))).toBe(true)
    }), 120_000)

  it.scopedLive("its embedding snippet without a login fails with the CLI's reason, never prints it as model text", () =>
    Effect.gen(function*() {
      // FakeModel stands where the API would be; with no key the CLI never calls it.
      const model = yield* FakeModel.make({ replies: [FakeModel.text("never sent")] })
      const d = yield* ClaudeCli.offlineDirs("skein-readme-nologin-")
      const file = yield* snippetFile
      const env = spawnEnv({
        ...ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
        ANTHROPIC_API_KEY: undefined,
        SKEIN_ROOT: Path.join(d.root, "state")
      })
      const ran = yield* run(process.execPath, [...TsChild.nodeArgs(file, "tsx")], { cwd: d.cwd, env })
      expect(ran.stdout).toBe("")
      expect(ran.code).toBe(1)
      expect(ran.stderr.trim()).toMatch(/Not logged in · Please run \/login$/)
      expect(ran.stderr.trim().split("\n").length).toBe(1)
      expect((yield* model.requests).filter(FakeModel.isConversation)).toEqual([])
    }), 120_000)
})
