/**
 * Builds the FakeCli child into one self-contained ESM file, cached on disk.
 *
 * Running the TypeScript entry through tsx's loader costs about a second per
 * spawn, nearly all of it in routing effect's few hundred modules through the
 * loader hook. A bundle starts in a fifth of that. The bundler is the esbuild
 * that tsx itself runs on, resolved through tsx. The cache is keyed by the
 * content of every input file, so an edit to any source rebuilds it.
 */
import type * as Esbuild from "esbuild"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"

interface Manifest {
  readonly entry: string
  readonly bundle: string
  readonly inputs: Readonly<Record<string, string>>
}

const digest = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex")

const cacheDir = () => path.join(os.tmpdir(), `skein-fake-cli-${os.userInfo().uid}`)

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

const loadEsbuild = (): typeof Esbuild => {
  const fromTsx = createRequire(createRequire(import.meta.url).resolve("tsx"))
  return fromTsx(fromTsx.resolve("esbuild"))
}

/** The path of an up-to-date bundle of `entry`, building it if needed. Throws if it cannot. */
export const bundle = (entry: string): string => {
  const dir = cacheDir()
  const manifestFile = path.join(dir, `${digest(entry).slice(0, 16)}.json`)
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
    outfile: path.join(dir, "fake-cli.mjs")
  })
  const output = result.outputFiles[0]
  if (output === undefined) throw new Error("fake-cli bundle: esbuild produced no output")
  const inputs: Record<string, string> = {}
  for (const input of Object.keys(result.metafile.inputs)) {
    const file = path.resolve(workingDir, input)
    inputs[file] = digest(fs.readFileSync(file))
  }
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const bundleFile = path.join(dir, `fake-cli-${digest(output.contents).slice(0, 16)}.mjs`)
  if (!fs.existsSync(bundleFile)) writeAtomic(bundleFile, output.contents)
  writeAtomic(manifestFile, JSON.stringify({ entry, bundle: bundleFile, inputs } satisfies Manifest))
  return bundleFile
}
