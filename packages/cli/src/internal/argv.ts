/**
 * Puts a command line in the order @effect/cli parses: the subcommand path
 * first, then every option and argument, wherever the person typed them
 * (`skein --root X sessions list` becomes `skein sessions list --root X`).
 * It also turns the mistakes @effect/cli would answer with a help document,
 * or silently read as a positional argument (an unknown option, an unknown
 * subcommand), into one line.
 */
import * as Options from "@effect/cli/Options"
import type * as Usage from "@effect/cli/Usage"
import * as Either from "effect/Either"
import * as Option from "effect/Option"

/** A command: its options' usage and its subcommands. */
export interface Spec {
  readonly name: string
  readonly options: Usage.Usage
  readonly children: ReadonlyArray<Spec>
}

/** A command that takes `options` and has no subcommands. */
export const leaf = (name: string, options: Record<string, Options.Options<unknown>>): Spec => ({
  name,
  options: Options.getUsage(Options.all(options)),
  children: []
})

/** A command made of subcommands, each with its options. */
export const group = (name: string, children: Record<string, Record<string, Options.Options<unknown>>>): Spec => ({
  name,
  options: Options.getUsage(Options.none),
  children: Object.entries(children).map(([child, options]) => leaf(child, options))
})

interface OptionName {
  readonly name: string
  readonly takesValue: boolean
}

const namesOf = (usage: Usage.Usage): ReadonlyArray<OptionName> => {
  switch (usage._tag) {
    case "Named":
      return usage.names.map((name) => ({ name, takesValue: Option.isSome(usage.acceptedValues) }))
    case "Optional":
    case "Repeated":
      return namesOf(usage.usage)
    case "Alternation":
    case "Concat":
      return [...namesOf(usage.left), ...namesOf(usage.right)]
    default:
      return []
  }
}

/** @effect/cli's own options, valid on every command. */
const builtIns: ReadonlyArray<OptionName> = [
  { name: "--help", takesValue: false },
  { name: "-h", takesValue: false },
  { name: "--version", takesValue: false },
  { name: "--wizard", takesValue: false },
  { name: "--log-level", takesValue: true },
  { name: "--completions", takesValue: true }
]

const optionsOf = (spec: Spec): ReadonlyArray<OptionName> => [...builtIns, ...namesOf(spec.options)]

const allSpecs = (spec: Spec): ReadonlyArray<Spec> => [spec, ...spec.children.flatMap(allSpecs)]

const isOption = (arg: string) => arg.length > 1 && arg.startsWith("-")
const nameOf = (arg: string) => arg.split("=")[0] ?? arg
const isHelp = (arg: string) => arg === "--help" || arg === "-h"

/** Checks every option of the chosen command is one of its own. */
const check = (root: Spec, spec: Spec, path: ReadonlyArray<string>, rest: ReadonlyArray<string>): Either.Either<void, string> => {
  const everywhere = allSpecs(root).flatMap(optionsOf)
  // A command that still needs a subcommand may be given its subcommands' options.
  const own = spec.children.length > 0 ? everywhere : optionsOf(spec)
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!
    if (arg === "--") break
    if (!isOption(arg)) continue
    const known = own.find((o) => o.name === nameOf(arg))
    if (known === undefined) {
      const where = `'${path.join(" ")}'`
      return Either.left(
        everywhere.some((o) => o.name === nameOf(arg))
          ? `option ${nameOf(arg)} does not apply to ${where} (see ${path.join(" ")} --help)`
          : `unknown option ${nameOf(arg)} for ${where} (see ${path.join(" ")} --help)`
      )
    }
    if (known.takesValue && !arg.includes("=")) {
      // A value that looks like an option is that option, not this one's value: `--model --json` lacks a model.
      const value = rest[i + 1]
      if (value === undefined || value === "--" || isOption(value)) {
        return Either.left(`option ${known.name} needs a value (see ${path.join(" ")} --help)`)
      }
      i++
    }
  }
  return Either.void
}

/**
 * `args` without the runtime and script. Returns the reordered arguments, or
 * the one line that explains why they cannot be run.
 */
export const normalize = (root: Spec, args: ReadonlyArray<string>): Either.Either<ReadonlyArray<string>, string> => {
  const takesValue = new Set(allSpecs(root).flatMap(optionsOf).filter((o) => o.takesValue).map((o) => o.name))
  const path: Array<string> = [root.name]
  const rest: Array<string> = []
  let node = root
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === "--") {
      rest.push(...args.slice(i))
      break
    }
    if (isOption(arg)) {
      rest.push(arg)
      if (takesValue.has(nameOf(arg)) && !arg.includes("=") && i + 1 < args.length) rest.push(args[++i]!)
      continue
    }
    if (node.children.length > 0) {
      const child = node.children.find((c) => c.name === arg)
      if (child === undefined) {
        return Either.left(`unknown command '${arg}' for '${path.join(" ")}' (expected ${node.children.map((c) => c.name).join(", ")})`)
      }
      path.push(arg)
      node = child
      continue
    }
    rest.push(arg)
  }
  // Help or the version wins over everything else typed with it, before `--` (after it, `-h` is a prompt).
  const beforeDashes = rest.includes("--") ? rest.slice(0, rest.indexOf("--")) : rest
  if (beforeDashes.some(isHelp)) return Either.right([...path.slice(1), "--help"])
  if (beforeDashes.includes("--version")) return Either.right(["--version"])
  if (node.children.length > 0) {
    // A command with subcommands does nothing by itself: show its help.
    if (path.length === 1 && rest.length === 0) return Either.right(["--help"])
    return Either.flatMap(check(root, node, path, rest), () =>
      Either.left(`'${path.join(" ")}' needs a command: ${node.children.map((c) => c.name).join(", ")} (see ${path.join(" ")} --help)`))
  }
  return Either.map(check(root, node, path, rest), () => [...path.slice(1), ...rest])
}
