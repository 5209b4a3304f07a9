import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: each real CLI process costs ~200 MB and a core for ~0.5 s.
    maxWorkers: 2,
    minWorkers: 1
  }
})
