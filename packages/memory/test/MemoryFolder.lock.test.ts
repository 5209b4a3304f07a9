/**
 * `MEMORY.md` is read, changed and written by several jobs of one project at
 * once (extractions of two sessions, a dream, `skein memory add`). Each
 * read-modify-write holds the index lock, so none loses another's lines.
 */
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { MemoryFile, MemoryFolder } from "@skein/memory"
import { FileLock } from "@skein/kernel"
import * as TsChild from "@skein/testkit/TsChild"
import { Effect, Option, Schema, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))
const repoRoot = path.resolve(here, "../../..")
const writer = path.join(here, "fixtures", "index-writer.ts")

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "skein-memory-lock-" }))

const memory = (name: string) =>
  Schema.decodeSync(MemoryFile.Memory)({ name, description: `fact ${name}`, type: "project", body: `The fact ${name}.` })

const indexedFiles = (dir: string) =>
  Effect.map(MemoryFolder.read(dir), (snapshot) =>
    snapshot.index.flatMap((line) => line._tag === "Entry" ? [line.entry.file] : []).sort())

describe("MemoryFolder under concurrent writers", () => {
  it.scopedLive("concurrent writers lose no MEMORY.md line: 24 writes at once all stay indexed", () =>
    Effect.gen(function*() {
      const dir = path.join(yield* tempDir, "memory")
      const names = Array.from({ length: 24 }, (_, i) => `fact-${String(i).padStart(2, "0")}`)
      yield* Effect.forEach(names, (name) => MemoryFolder.write(dir, memory(name)), { concurrency: "unbounded", discard: true })
      expect(yield* indexedFiles(dir)).toEqual(names.map((n) => `${n}.md`))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("two extractions and a dream: repairs while memories are written lose no line, and remove drops only its own", () =>
    Effect.gen(function*() {
      const dir = path.join(yield* tempDir, "memory")
      yield* MemoryFolder.write(dir, memory("old-one"))
      yield* MemoryFolder.write(dir, memory("old-two"))
      // Two extraction workers each write memory files the way the CLI does (no index line), then skein repairs the index.
      const extraction = (prefix: string) =>
        Effect.forEach(Array.from({ length: 8 }, (_, i) => `${prefix}-${i}`), (name) =>
          Effect.sync(() => fs.writeFileSync(path.join(dir, `${name}.md`), MemoryFile.render(memory(name)))).pipe(
            Effect.zipRight(MemoryFolder.repair(dir))
          ), { discard: true })
      // Meanwhile the dream removes one memory and `memory add` writes others.
      const dream = MemoryFolder.remove(dir, "old-one.md").pipe(
        Effect.zipRight(Effect.forEach(["added-0", "added-1", "added-2", "added-3"], (name) => MemoryFolder.write(dir, memory(name), { title: `Added ${name}`, hook: `what ${name} says` }), {
          concurrency: "unbounded",
          discard: true
        }))
      )
      yield* Effect.all([extraction("first"), extraction("second"), dream], { concurrency: "unbounded", discard: true })
      const expected = [
        "old-two",
        ...Array.from({ length: 8 }, (_, i) => `first-${i}`),
        ...Array.from({ length: 8 }, (_, i) => `second-${i}`),
        "added-0",
        "added-1",
        "added-2",
        "added-3"
      ].map((n) => `${n}.md`).sort()
      expect(yield* indexedFiles(dir)).toEqual(expected)
      expect(MemoryFolder.validate(yield* MemoryFolder.read(dir))).toEqual([])
      // The lines `memory add` wrote are its own, not ones a later repair made up for unindexed files.
      const lines = (yield* MemoryFolder.read(dir)).index.map((line) => line.raw)
      for (const name of ["added-0", "added-1", "added-2", "added-3"]) {
        expect(lines).toContain(`- [Added ${name}](${name}.md) — what ${name} says`)
      }
      // Nothing is left holding the lock.
      expect(Option.flatMap(yield* FileLock.status(path.join(dir, MemoryFolder.indexLockName)), (s) => s.pid)).toEqual(Option.none())
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("three OS processes writing one folder at once lose no MEMORY.md line", () =>
    Effect.gen(function*() {
      const dir = path.join(yield* tempDir, "memory")
      const run = (prefix: string) =>
        Effect.scoped(Effect.gen(function*() {
          const child = yield* Command.start(
            Command.make(process.execPath, ...TsChild.nodeArgs(writer), dir, prefix, "10").pipe(Command.workingDirectory(repoRoot))
          )
          const [stderr, code] = yield* Effect.all([Stream.mkString(Stream.decodeText(child.stderr)), child.exitCode], {
            concurrency: "unbounded"
          })
          expect(stderr).toBe("")
          expect(code).toBe(0)
        }))
      yield* Effect.all([run("a"), run("b"), run("c")], { concurrency: "unbounded", discard: true })
      const expected = ["a", "b", "c"].flatMap((p) => Array.from({ length: 10 }, (_, i) => `${p}-${i}.md`)).sort()
      expect(yield* indexedFiles(dir)).toEqual(expected)
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })
})
