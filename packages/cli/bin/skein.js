#!/usr/bin/env node
// The `skein` command. Installed, it runs the compiled dist/main.js with plain Node.
// In a checkout of the repository (tsconfig.build.json sits next to bin/; the
// published files do not include it) it runs the TypeScript sources through tsx,
// every @skein/* import resolved to sources, so nothing needs building first.
import { existsSync } from "node:fs"

if (existsSync(new URL("../tsconfig.build.json", import.meta.url))) {
  const { register: registerTsx } = await import("tsx/esm/api")
  registerTsx()
  const { register } = await import("node:module")
  register("./source-condition.js", import.meta.url)
  await import("../src/main.ts")
} else {
  await import("../dist/main.js")
}
