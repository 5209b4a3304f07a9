import { Options } from "@effect/cli"
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as Argv from "../src/internal/argv.js"
import { spec } from "../src/Skein.js"

const normalize = (args: ReadonlyArray<string>) => Argv.normalize(spec, args)

describe("Argv.normalize", () => {
  it("moves options typed before the subcommand after it, with their values", () => {
    expect(normalize(["--root", "sessions", "sessions", "list", "--json"])).toEqual(
      Either.right(["sessions", "list", "--root", "sessions", "--json"])
    )
    expect(normalize(["--fake-model", "run", "hi"])).toEqual(Either.right(["run", "--fake-model", "hi"]))
    expect(normalize(["--root", "/r", "--json", "tasks", "list"])).toEqual(Either.right(["tasks", "list", "--root", "/r", "--json"]))
    expect(normalize(["--pass", "summarize", "compact", "abc"])).toEqual(Either.right(["compact", "--pass", "summarize", "abc"]))
    expect(normalize(["--port", "0", "serve"])).toEqual(Either.right(["serve", "--port", "0"]))
  })

  it("keeps what follows -- as arguments", () => {
    expect(normalize(["run", "--", "--not-an-option"])).toEqual(Either.right(["run", "--", "--not-an-option"]))
  })

  it("lets help through anywhere, and shows it for a bare skein", () => {
    expect(normalize(["--help", "sessions", "show"])).toEqual(Either.right(["sessions", "show", "--help"]))
    expect(normalize([])).toEqual(Either.right(["--help"]))
  })

  it("an argument that looks like an option is an option, or an error: -h is help, --model needs a value", () => {
    expect(normalize(["run", "--fake-model", "-h"])).toEqual(Either.right(["run", "--help"]))
    expect(normalize(["--fake-model", "run", "hi", "--help"])).toEqual(Either.right(["run", "--help"]))
    expect(normalize(["run", "--fake-model", "--model"])).toEqual(Either.left("option --model needs a value (see skein run --help)"))
    expect(normalize(["run", "--model", "--fake-model", "hi"])).toEqual(Either.left("option --model needs a value (see skein run --help)"))
    expect(normalize(["run", "--model", "-h"])).toEqual(Either.right(["run", "--help"]))
    expect(normalize(["sessions", "branch", "abc", "--at"])).toEqual(Either.left("option --at needs a value (see skein sessions branch --help)"))
    // After --, it is the prompt.
    expect(normalize(["run", "--fake-model", "--", "-h"])).toEqual(Either.right(["run", "--fake-model", "--", "-h"]))
  })

  it("accepts --name=value", () => {
    expect(normalize(["--root=/tmp", "sessions", "list"])).toEqual(Either.right(["sessions", "list", "--root=/tmp"]))
  })

  it("reads a value-taking option's value even when it looks like a command", () => {
    const tree: Argv.Spec = {
      name: "x",
      options: Options.getUsage(Options.none),
      children: [{ name: "a", options: Options.getUsage(Options.text("name")), children: [] }]
    }
    expect(Argv.normalize(tree, ["--name", "a", "a"])).toEqual(Either.right(["a", "--name", "a"]))
  })

  it("explains unknown options, misplaced options, unknown and missing commands in one line", () => {
    expect(normalize(["run", "--nope", "hi"])).toEqual(Either.left("unknown option --nope for 'skein run' (see skein run --help)"))
    expect(normalize(["sessions", "rm", "--json", "x"])).toEqual(
      Either.left("option --json does not apply to 'skein sessions rm' (see skein sessions rm --help)")
    )
    expect(normalize(["bogus"])).toEqual(
      Either.left("unknown command 'bogus' for 'skein' (expected run, chat, serve, sessions, tasks, compact, memory, dream, pipeline, acp)")
    )
    expect(normalize(["sessions"])).toEqual(
      Either.left("'skein sessions' needs a command: list, show, branch, resume, rm (see skein sessions --help)")
    )
    expect(normalize(["tasks"])).toEqual(Either.left("'skein tasks' needs a command: list, show, kill (see skein tasks --help)"))
  })
})
