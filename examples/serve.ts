/**
 * skein serve: an opencode-compatible HTTP/SSE server over Claude Code sessions.
 *
 *   npx tsx --conditions=@skein/source examples/serve.ts [--port N] [--hostname H] [--root DIR …] [--fake-model]
 *
 * This is `skein serve` itself (the same command, options and runtime; see
 * packages/cli/src/Serve.ts), so the two never differ. It prints
 * `listening on http://HOST:PORT` once it accepts connections, then the
 * token: from SKEIN_SERVER_TOKEN (not printed), or generated and stored 0600
 * under the state folder. opencode's clients pass it as
 * OPENCODE_SERVER_PASSWORD (basic auth, any user name).
 *
 * By default the CLIs it starts use the user's own Claude Code login and
 * settings. `--fake-model` starts the embedded FakeModel (with its `[slow]`
 * and `$ command` conventions) and points `--bare` CLIs at it, with a
 * throwaway config folder: a demo with no key.
 */
process.argv.splice(2, 0, "serve")
await import("@skein/cli/main")
export {}
