/**
 * Runs a bench over skein as it ships (plain JavaScript, as `tsc` emits it)
 * instead of through tsx. tsx compiles with esbuild's `keepNames`, which
 * follows every function it defines with `__name(fn, "…")`: an
 * `Object.defineProperty` on each closure as it is made. A session makes
 * hundreds of closures when it starts and dozens per turn, so under tsx each
 * one also costs a property array of its own and a defineProperty call: in
 * `bench/scale` about 17 KB of heap per idle session and about 15% of the host
 * CPU per turn that the built package does not spend. The Agent SDK, loaded
 * from its own `.mjs`, never paid it, so a comparison run under tsx was unfair
 * to skein.
 *
 * `rerun` bundles the bench's entry with esbuild (no `keepNames`, sources
 * through the `@skein/source` condition, packages bundled in) into `.tmp/`
 * under the repository, runs the bundle with node and the same arguments,
 * and returns its exit code; in that child, or with `--tsx`, it returns
 * `undefined` and the bench goes on as it is.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

const marker = "SKEIN_BENCH_SHIPPED"

/**
 * Each module's `import.meta.dirname` and `import.meta.filename` stay those of
 * its own source file, so paths a module resolves beside itself (a support
 * script, `node_modules`) are the same bundled as under tsx.
 */
const sourcePaths = {
  name: "source-paths",
  setup(build: { onLoad: (options: { filter: RegExp }, load: (args: { path: string }) => Promise<{ contents: string; loader: "ts" } | undefined>) => void }) {
    build.onLoad({ filter: /\.ts$/ }, async (args) => {
      const text = await Fs.promises.readFile(args.path, "utf8")
      // The expressions, not the words in a string or a comment's code span.
      const uses = /(?<![\w"'`.])import\.meta\.(dirname|filename)\b/g
      if (!uses.test(text)) return undefined
      const paths = { dirname: JSON.stringify(Path.dirname(args.path)), filename: JSON.stringify(args.path) }
      return { contents: text.replace(uses, (_, name: "dirname" | "filename") => paths[name]), loader: "ts" }
    })
  }
}

/** Runs `entry` bundled, unless this is that run already; the child's exit code, else undefined. */
export const rerun = async (entry: string): Promise<number | undefined> => {
  if (process.env[marker] === "1" || process.argv.includes("--tsx")) return undefined
  const esbuild = await import("esbuild")
  const repo = Path.resolve(Path.dirname(entry), "..")
  const outfile = Path.join(repo, ".tmp", "bench", `${Path.basename(entry, ".ts")}.mjs`)
  Fs.mkdirSync(Path.dirname(outfile), { recursive: true })
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    conditions: ["@skein/source"],
    plugins: [sourcePaths],
    // The CLI's own package is found at run time, as installed.
    external: ["@anthropic-ai/*"],
    // Bundled CommonJS dependencies call `require` for node's own modules.
    banner: { js: "import { createRequire as __skeinRequire } from 'node:module'; const require = __skeinRequire(import.meta.url);" },
    logLevel: "warning"
  })
  console.log(`(running ${Path.relative(repo, entry)} bundled, as shipped: ${Path.relative(repo, outfile)}; --tsx runs it under tsx)`)
  const child = ChildProcess.spawnSync(process.execPath, [...process.execArgv.filter((a) => a.startsWith("--max")), outfile, ...process.argv.slice(2)], {
    stdio: "inherit",
    env: { ...process.env, [marker]: "1" }
  })
  return child.status ?? 1
}
