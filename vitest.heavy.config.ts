import { defineConfig } from "vitest/config"
import { heavy, sourceConditions, sourceEnv } from "./vitest.config.js"

/** The TUI (tmux), browser (Chromium) and multi-process cluster suites: one file at a time, each owns the machine. */
export default defineConfig({
  ...sourceConditions,
  test: {
    include: heavy.map((glob) => glob.replace("**/", "packages/*/test/**/")),
    env: sourceEnv,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 1,
    minWorkers: 1,
    fileParallelism: false
  }
})
