import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { expect, it, layer } from "@effect/vitest"
import { MemoryFile, MemoryFolder } from "@skein/memory"
import { Effect, Either, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "skein-memory-" }))

const memory = (name: string, description: string, body = "A fact.", type: MemoryFile.MemoryType = "user") =>
  Schema.decodeSync(MemoryFile.Memory)({ name, description, type, body })

it("a memory renders in the CLI's frontmatter and reads back", () => {
  const m = memory("prefers-tabs", "The user indents with tabs: always", "Use tabs.\n\n**Why:** said so.", "feedback")
  const text = MemoryFile.render(m)
  expect(text.split("\n").slice(0, 6)).toEqual([
    "---",
    "name: prefers-tabs",
    "description: \"The user indents with tabs: always\"",
    "metadata:",
    "  type: feedback",
    "---"
  ])
  expect(MemoryFile.parse("prefers-tabs.md", text)).toEqual(Either.right(m))
})

it("parse names what is wrong with a file the CLI would not understand", () => {
  const reason = (text: string) => Either.match(MemoryFile.parse("x.md", text), { onLeft: (e) => e.reason, onRight: () => "ok" })
  expect(reason("just text")).toBe("no frontmatter")
  expect(reason("---\nname: a\n")).toBe("unterminated frontmatter")
  expect(reason("---\nname: Not A Slug\ndescription: d\nmetadata:\n  type: user\n---\nbody")).toContain("name")
  expect(reason("---\nname: ok\ndescription: d\nmetadata:\n  type: opinion\n---\nbody")).toContain("type")
  expect(reason("---\nname: ok\ndescription: 'it''s fine'\nmetadata:\n  type: reference\n---\nbody")).toBe("ok")
})

it("index lines: parsed, rendered, and never longer than the limit (the link is kept)", () => {
  const line = MemoryFile.parseLine("- [Kumquat preference](kumquat.md) — the user likes kumquats")
  expect(line).toMatchObject({ _tag: "Entry", entry: { title: "Kumquat preference", file: "kumquat.md", hook: "the user likes kumquats" } })
  expect(MemoryFile.parseLine("# Memories")._tag).toBe("Blank")
  expect(MemoryFile.parseLine("remember the milk")._tag).toBe("Other")
  const long = MemoryFile.renderLine({ title: "T", file: "t.md", hook: "x".repeat(400) }, 150)
  expect([...long].length).toBe(150)
  expect(long.startsWith("- [T](t.md) — xxx")).toBe(true)
  expect(long.endsWith("…")).toBe(true)
  const hugeTitle = MemoryFile.renderLine({ title: "y".repeat(300), file: "t.md", hook: "h" }, 150)
  expect([...hugeTitle].length).toBeLessThanOrEqual(150)
  expect(hugeTitle).toContain("](t.md)")
})

layer(NodeContext.layer)("MemoryFolder", (it) => {
  it("the folder is the CLI's: <config>/projects/<sanitized cwd>/memory", () => {
    expect(MemoryFolder.directory("/c", "/tmp/a b/cwd")).toBe("/c/projects/-tmp-a-b-cwd/memory")
  })

  it.scoped("write adds a file and one index line; writing the same file again replaces its line in place", () =>
    Effect.gen(function*() {
      const dir = path.join(yield* tempDir, "memory")
      const first = yield* MemoryFolder.write(dir, memory("kumquats", "the user likes kumquats"), { title: "Kumquats" })
      yield* MemoryFolder.write(dir, memory("deploy-friday", "no deploys on Fridays"))
      expect(first).toEqual({ file: "kumquats.md", line: "- [Kumquats](kumquats.md) — the user likes kumquats" })
      yield* MemoryFolder.write(dir, memory("kumquats", "the user loves kumquats"), { title: "Kumquats" })
      expect(fs.readFileSync(path.join(dir, "MEMORY.md"), "utf8")).toBe(
        "- [Kumquats](kumquats.md) — the user loves kumquats\n- [deploy-friday](deploy-friday.md) — no deploys on Fridays\n"
      )
      const snapshot = yield* MemoryFolder.read(dir)
      expect([...snapshot.memories.keys()]).toEqual(["deploy-friday.md", "kumquats.md"])
      expect(MemoryFolder.validate(snapshot)).toEqual([])
      yield* MemoryFolder.remove(dir, "kumquats.md")
      expect(fs.readFileSync(path.join(dir, "MEMORY.md"), "utf8")).toBe("- [deploy-friday](deploy-friday.md) — no deploys on Fridays\n")
      expect(fs.existsSync(path.join(dir, "kumquats.md"))).toBe(false)
    }))

  it.scoped("a missing folder reads as empty and validates", () =>
    Effect.gen(function*() {
      const snapshot = yield* MemoryFolder.read(path.join(yield* tempDir, "nope"))
      expect(snapshot.memories.size).toBe(0)
      expect(snapshot.index).toEqual([])
      expect(MemoryFolder.validate(snapshot)).toEqual([])
    }))

  it.scoped("validate reports each problem; repair fixes the mechanical ones and reports the rest", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      fs.writeFileSync(path.join(dir, "a.md"), MemoryFile.render(memory("a", "first")))
      fs.writeFileSync(path.join(dir, "b.md"), MemoryFile.render(memory("b", "second")))
      fs.writeFileSync(path.join(dir, "broken.md"), "no frontmatter here")
      fs.writeFileSync(
        path.join(dir, "MEMORY.md"),
        [
          "# Index",
          `- [A](a.md) — ${"long ".repeat(40)}`,
          "- [Gone](gone.md) — deleted",
          "- [A again](a.md) — twice",
          "a stray note",
          "- [Broken](broken.md) — still a file"
        ].join("\n") + "\n"
      )
      const problems = MemoryFolder.validate(yield* MemoryFolder.read(dir))
      expect(problems.map((p) => p._tag).sort()).toEqual(
        ["DanglingEntry", "DuplicateEntry", "InvalidMemory", "LineTooLong", "NotAnEntry", "Unindexed"].sort()
      )
      const { fixed, remaining } = yield* MemoryFolder.repair(dir)
      expect(fixed.map((p) => p._tag).sort()).toEqual(["DanglingEntry", "DuplicateEntry", "LineTooLong", "Unindexed"].sort())
      expect(remaining.map((p) => p._tag).sort()).toEqual(["InvalidMemory", "NotAnEntry"])
      const lines = fs.readFileSync(path.join(dir, "MEMORY.md"), "utf8").trimEnd().split("\n")
      expect(lines[0]).toBe("# Index")
      expect(lines[1]?.startsWith("- [A](a.md) — long")).toBe(true)
      expect(lines.slice(2)).toEqual(["a stray note", "- [Broken](broken.md) — still a file", "- [b](b.md) — second"])
      expect(lines.every((l) => [...l].length <= 150)).toBe(true)
      // Nothing left to fix: a second repair writes nothing.
      const mtime = fs.statSync(path.join(dir, "MEMORY.md")).mtimeMs
      expect((yield* MemoryFolder.repair(dir)).fixed).toEqual([])
      expect(fs.statSync(path.join(dir, "MEMORY.md")).mtimeMs).toBe(mtime)
    }))

  it.scoped("an index over 25 KB is reported, not cut: choosing what to drop is the dream's", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const lines: Array<string> = []
      for (let i = 0; i < 260; i++) {
        const name = `fact-${i}`
        fs.writeFileSync(path.join(dir, `${name}.md`), MemoryFile.render(memory(name, `fact number ${i}`)))
        lines.push(MemoryFile.renderLine({ title: name, file: `${name}.md`, hook: "h".repeat(120) }, 150))
      }
      fs.writeFileSync(path.join(dir, "MEMORY.md"), lines.join("\n") + "\n")
      const { remaining } = yield* MemoryFolder.repair(dir)
      expect(remaining).toEqual([{ _tag: "IndexTooLarge", bytes: fs.statSync(path.join(dir, "MEMORY.md")).size }])
      expect(fs.statSync(path.join(dir, "MEMORY.md")).size).toBeGreaterThan(25 * 1024)
    }))
})
