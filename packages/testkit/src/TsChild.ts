/**
 * Runs a TypeScript entry as a plain `node` child, cheaply.
 *
 * Through tsx's loader a child spends about a second per spawn routing
 * effect's few hundred modules through the loader hook; a single-file bundle
 * starts in a fifth of that, which matters to tests that spawn fifty children
 * or run under load. Bundles are cached on disk, keyed by the content of every
 * input file, so an edit to any source rebuilds them.
 */
import type * as Esbuild from "esbuild"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

interface Manifest {
  readonly entry: string
  readonly bundle: string
  readonly inputs: Readonly<Record<string, string>>
}

/** Bumped when the build options change, so older cached bundles are not reused. */
const buildVersion = 3

const digest = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex")

const cacheDir = () => path.join(os.tmpdir(), `skein-ts-child-${os.userInfo().uid}`)

/** Writes via a temp file and a rename, so concurrent builders never see half a file. */
const writeAtomic = (file: string, data: string | Uint8Array) => {
  const temp = `${file}.${process.pid}.${Date.now()}.tmp`
  fs.writeFileSync(temp, data)
  fs.renameSync(temp, file)
}

const isManifest = (u: unknown): u is Manifest =>
  typeof u === "object" && u !== null && "entry" in u && "bundle" in u && "inputs" in u &&
  typeof u.entry === "string" && typeof u.bundle === "string" && typeof u.inputs === "object" && u.inputs !== null

const readManifest = (file: string): Manifest | undefined => {
  try {
    const parsed: unknown = JSON.parse(fs.readFileSync(file, "utf8"))
    return isManifest(parsed) ? parsed : undefined
  } catch {
    return undefined
  }
}

const isFresh = (manifest: Manifest, entry: string) =>
  manifest.entry === entry &&
  fs.existsSync(manifest.bundle) &&
  Object.entries(manifest.inputs).every(([file, hash]) => {
    try {
      return digest(fs.readFileSync(file)) === hash
    } catch {
      return false
    }
  })

const loadEsbuild = (): typeof Esbuild => createRequire(import.meta.url)("esbuild")

/** The path of an up-to-date bundle of `entry`, building it if needed. Throws if it cannot. */
export const bundle = (entry: string): string => {
  const dir = cacheDir()
  const name = path.basename(entry).replace(/\.[cm]?tsx?$/, "")
  const manifestFile = path.join(dir, `${digest(`${buildVersion}:${entry}`).slice(0, 16)}.json`)
  const cached = readManifest(manifestFile)
  if (cached !== undefined && isFresh(cached, entry)) return cached.bundle

  const esbuild = loadEsbuild()
  const workingDir = path.dirname(entry)
  const result = esbuild.buildSync({
    entryPoints: [entry],
    absWorkingDir: workingDir,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    write: false,
    metafile: true,
    logLevel: "silent",
    // @skein/* imports resolve to the packages' TypeScript sources, as in the tests (see the packages' `exports`).
    conditions: ["@skein/source"],
    // CommonJS dependencies (undici, under the platform's Node layer) require node builtins at run time.
    banner: { js: "import { createRequire as __skeinRequire } from \"node:module\"; const require = __skeinRequire(import.meta.url);" },
    outfile: path.join(dir, `${name}.mjs`)
  })
  const output = result.outputFiles[0]
  if (output === undefined) throw new Error(`bundle of ${entry}: esbuild produced no output`)
  const inputs: Record<string, string> = {}
  for (const input of Object.keys(result.metafile.inputs)) {
    const file = path.resolve(workingDir, input)
    inputs[file] = digest(fs.readFileSync(file))
  }
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const bundleFile = path.join(dir, `${name}-${digest(output.contents).slice(0, 16)}.mjs`)
  if (!fs.existsSync(bundleFile)) writeAtomic(bundleFile, output.contents)
  writeAtomic(manifestFile, JSON.stringify({ entry, bundle: bundleFile, inputs } satisfies Manifest))
  return bundleFile
}

/**
 * Loader flags that let plain `node` run a TypeScript entry: tsx's ESM hook,
 * by absolute URL so the child's cwd does not matter, and @skein/* imports
 * resolved to sources.
 */
export const loaderArgs = (): ReadonlyArray<string> => [
  "--conditions=@skein/source",
  "--import",
  pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm")).href
]

/**
 * How a child's TypeScript runs. `"bundle"` (the default) runs the cached
 * single-file build and falls back to `"tsx"` if it cannot be built; `"tsx"`
 * runs the sources through tsx's loader, about five times slower to start.
 */
export type Runner = "bundle" | "tsx"

const built = new Map<string, string | null>()

const bundledOnce = (entry: string): string | null => {
  let file = built.get(entry)
  if (file === undefined) {
    try {
      file = bundle(entry)
    } catch {
      file = null
    }
    built.set(entry, file)
  }
  return file
}

/** The `node` arguments that start `entry` (before the entry's own arguments). */
export const nodeArgs = (entry: string, runner: Runner = "bundle"): ReadonlyArray<string> => {
  const file = runner === "bundle" ? bundledOnce(entry) : null
  return file === null ? [...loaderArgs(), entry] : [file]
}
