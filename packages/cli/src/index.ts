/**
 * @skein/cli: the `skein` command.
 */
export * as CliError from "./CliError.js"
export * as CtrlC from "./CtrlC.js"
export * as Output from "./Output.js"
export * as Run from "./Run.js"
export * as Sessions from "./Sessions.js"
export * as Skein from "./Skein.js"
