/**
 * `@anthropic-ai/claude-agent-sdk`, installed on demand for benches that
 * compare skein with it. It is not a dependency of the repository: the first
 * use runs `npm install --prefix <tmp>` into a cached temp directory (the
 * same one `bench/startup.ts` uses), without the SDK's optional platform
 * binaries, since every bench points it at a CLI of its own.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"

/** The SDK release that bundles CLI 2.1.332 (its package.json says so in `claudeCodeVersion`). */
export const sdkVersion = "0.3.332"

export interface SdkMessage {
  readonly type: string
  readonly subtype?: string | undefined
}

/** What the benches use of a `Query`. */
export interface SdkQuery extends AsyncIterable<unknown> {
  readonly close: () => void
  readonly initializationResult: () => Promise<unknown>
}

export type QueryFunction = (params: {
  readonly prompt: AsyncIterable<unknown>
  readonly options: { readonly [key: string]: unknown }
}) => SdkQuery

const isQueryFunction = (u: unknown): u is QueryFunction => typeof u === "function"

export const isSdkMessage = (u: unknown): u is SdkMessage =>
  typeof u === "object" && u !== null && "type" in u && typeof u.type === "string"

/** The SDK's `query()`, installing the SDK first if need be. */
export const loadQuery = async (): Promise<{ readonly query: QueryFunction; readonly bundledCli: unknown }> => {
  const dir = Path.join(Os.tmpdir(), `skein-bench-agent-sdk-${sdkVersion}`)
  const pkg = Path.join(dir, "node_modules", "@anthropic-ai", "claude-agent-sdk")
  if (!Fs.existsSync(Path.join(pkg, "sdk.mjs"))) {
    console.log(`installing @anthropic-ai/claude-agent-sdk@${sdkVersion} into ${dir} …`)
    ChildProcess.execFileSync("npm", [
      "install",
      "--prefix",
      dir,
      `@anthropic-ai/claude-agent-sdk@${sdkVersion}`,
      "--omit=optional",
      "--no-audit",
      "--no-fund",
      "--loglevel=error"
    ], { stdio: "inherit" })
  }
  const manifest: unknown = JSON.parse(Fs.readFileSync(Path.join(pkg, "package.json"), "utf8"))
  const bundledCli = typeof manifest === "object" && manifest !== null && "claudeCodeVersion" in manifest
    ? manifest.claudeCodeVersion
    : undefined
  const module: unknown = await import(Url.pathToFileURL(Path.join(pkg, "sdk.mjs")).href)
  const query = typeof module === "object" && module !== null && "query" in module ? module.query : undefined
  if (!isQueryFunction(query)) throw new Error(`no query() in ${pkg}`)
  return { query, bundledCli }
}

/**
 * An input for a long-lived streaming `query()`: `push` a user message,
 * `end` to close the stream (the SDK then ends the CLI's stdin).
 */
export const userInput = () => {
  const waiting: Array<(message: unknown) => void> = []
  const queued: Array<unknown> = []
  let ended = false
  const done = Symbol("done")
  const next = () =>
    new Promise<unknown>((resolve) => {
      const message = queued.shift()
      if (message !== undefined) resolve(message)
      else if (ended) resolve(done)
      else waiting.push(resolve)
    })
  async function* messages() {
    while (true) {
      const message = await next()
      if (message === done) return
      yield message
    }
  }
  const deliver = (message: unknown) => {
    const waiter = waiting.shift()
    if (waiter !== undefined) waiter(message)
    else queued.push(message)
  }
  return {
    messages: messages(),
    push: (content: string) => deliver({ type: "user", message: { role: "user", content }, parent_tool_use_id: null }),
    end: () => {
      ended = true
      for (const waiter of waiting.splice(0)) waiter(done)
    }
  }
}
