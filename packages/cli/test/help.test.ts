/**
 * `--help` on every command shows an example. In-process through
 * `Skein.main` (the bin's own entry), with stdout captured: help never starts
 * a CLI, and twenty processes would only measure tsx's start-up.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { Console, Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CtrlC from "../src/CtrlC.js"
import * as Skein from "../src/Skein.js"

const help = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const printed: Array<string> = []
    const console = yield* Console.consoleWith(Effect.succeed)
    const code = yield* Effect.withConsole(Skein.main(["node", "skein", ...args]), {
      ...console,
      log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void printed.push(args.map(String).join(" ")))
    })
    return { code, stdout: printed.join("\n") }
  }).pipe(Effect.provide(Layer.mergeAll(NodeContext.layer, ProcessHost.layerMemory(), CtrlC.layer)))

const commands = [
  [],
  ["run"],
  ["chat"],
  ["serve"],
  ["sessions"],
  ["sessions", "list"],
  ["sessions", "show"],
  ["sessions", "branch"],
  ["sessions", "resume"],
  ["sessions", "rm"],
  ["tasks"],
  ["tasks", "list"],
  ["tasks", "show"],
  ["tasks", "kill"],
  ["compact"],
  ["memory"],
  ["memory", "list"],
  ["memory", "add"],
  ["memory", "repair"],
  ["dream"]
]

describe("skein --help", () => {
  for (const command of commands) {
    it.scoped(`skein ${command.join(" ")} --help shows an example`, () =>
      Effect.gen(function*() {
        const ran = yield* help([...command, "--help"])
        expect(ran.code).toBe(0)
        expect(ran.stdout).toMatch(new RegExp(`Example: skein ${command.join(" ")}`))
      }))
  }

  it.scoped("--version prints the package's version", () =>
    Effect.gen(function*() {
      const manifest: { readonly version: string } = JSON.parse(
        Fs.readFileSync(Path.join(import.meta.dirname, "../package.json"), "utf8")
      )
      expect(Skein.version).toBe(manifest.version)
      const ran = yield* help(["--version"])
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain(manifest.version)
    }))

  it.scoped("-h with other options is help, never a prompt: skein run --fake-model -h", () =>
    Effect.gen(function*() {
      const ran = yield* help(["run", "--fake-model", "-h"])
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain("Example: skein run")
    }))

  it.scoped("--model with no value is a usage error, never a prompt: skein run --fake-model --model", () =>
    Effect.gen(function*() {
      const ran = yield* help(["run", "--fake-model", "--model"])
      expect(ran.code).toBe(2)
      expect(ran.stdout).toBe("")
    }))

  it.scoped("help shows usage as typed (skein run …), without @effect/cli's --wizard and --completions, and no ANSI codes off a terminal", () =>
    Effect.gen(function*() {
      for (const command of [["run"], ["sessions", "branch"], ["dream"]]) {
        const ran = yield* help([...command, "--help"])
        expect(ran.stdout).toMatch(new RegExp(`^\\$ skein ${command.join(" ")} `, "m"))
        expect(ran.stdout).not.toMatch(/--wizard|--completions|--log-level/)
        // eslint-disable-next-line no-control-regex
        expect(ran.stdout).not.toMatch(/\x1b\[/)
      }
    }))

  it.scoped("help typed before the command is the command's help", () =>
    Effect.gen(function*() {
      const ran = yield* help(["--help", "tasks", "kill"])
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain("Stop a running task")
    }))
})
