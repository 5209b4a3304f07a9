import { defineConfig } from "vitest/config"

/** Suites that drive a whole terminal or browser run alone, after the rest: see `vitest.heavy.config.ts`. */
export const heavy = ["**/*.tui.test.ts", "**/*.browser.test.ts"]

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    exclude: ["**/node_modules/**", ...heavy],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: each real CLI process costs ~200 MB and a core for ~0.5 s.
    maxWorkers: 2,
    minWorkers: 1
  }
})
