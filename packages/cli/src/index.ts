/**
 * @skein/cli: the `skein` command.
 */
export * as CliError from "./CliError.js"
export * as Compact from "./Compact.js"
export * as CtrlC from "./CtrlC.js"
export * as Memory from "./Memory.js"
export * as Output from "./Output.js"
export * as Progress from "./Progress.js"
export * as Run from "./Run.js"
export * as Serve from "./Serve.js"
export * as Sessions from "./Sessions.js"
export * as Skein from "./Skein.js"
export * as Tasks from "./Tasks.js"
