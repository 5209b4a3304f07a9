import { defineConfig } from "vitest/config"

/** Suites that drive a whole terminal or browser run alone, after the rest: see `vitest.heavy.config.ts`. */
export const heavy = ["**/*.tui.test.ts", "**/*.browser.test.ts", "**/*.cluster.test.ts"]

/**
 * Tests run from sources: the "@skein/source" export condition resolves every
 * @skein/* import to the package's `src/`, never its built `dist/`. Vitest
 * resolves with it, and so does every Node child a test starts (NODE_OPTIONS).
 */
export const sourceConditions = {
  resolve: { conditions: ["@skein/source", "node", "development|production"] },
  ssr: { resolve: { conditions: ["@skein/source", "node", "development|production"] } }
}
const nodeOptions = process.env.NODE_OPTIONS ?? ""
export const sourceEnv = {
  NODE_OPTIONS: nodeOptions.includes("--conditions=@skein/source")
    ? nodeOptions
    : `${nodeOptions} --conditions=@skein/source`.trim()
}

/**
 * serve's suite again over a SQL session store (see `packages/serve/test/harness.ts`):
 * the tests that start a server, not the units that never reach the store, nor
 * the store's own tests (they pick both databases themselves). The two
 * 10,000- and 100,000-event stress files (Replay, Backpressure) take 2.2-2.5x as
 * long over sqlite as over files (98 s and 52 s against 39 s and 23 s, one run,
 * a busy 2-core machine) and would take CI past its 20 minutes: the SQL log's
 * replay is tested on both databases in packages/sql and end to end in
 * test/e2e/serve-store-kill.test.ts. The whole suite over a store, those
 * included: `SKEIN_SERVE_STORE=sqlite|postgres npx vitest run --project default packages/serve/test`.
 */
const serveOverStore = (store: "sqlite" | "postgres") => ({
  extends: true as const,
  test: {
    name: `serve-${store}`,
    include: ["packages/serve/test/**/*.test.ts"],
    exclude: [
      "**/node_modules/**",
      ...heavy,
      "packages/serve/test/Store*.test.ts",
      "packages/serve/test/{subscriberBuffer,pendingFrames,sse,knownSessions}.test.ts",
      "packages/serve/test/{Replay,Backpressure}.test.ts"
    ],
    env: { ...sourceEnv, SKEIN_SERVE_STORE: store }
  }
})

/**
 * serve's suite again over @skein/cluster's registry (`SKEIN_SERVE_REGISTRY=cluster`,
 * see `packages/serve/test/harness.ts`): sessions as entities of a single
 * runner over a sqlite file, the edge's registry the cluster's. The files that
 * start a server, without the units, the store's own tests and the two stress
 * files, as `serve-sqlite`.
 */
const serveOverCluster = {
  extends: true as const,
  test: {
    name: "serve-cluster",
    include: ["packages/serve/test/**/*.test.ts"],
    exclude: [
      "**/node_modules/**",
      ...heavy,
      "packages/serve/test/Store*.test.ts",
      "packages/serve/test/{subscriberBuffer,pendingFrames,sse,knownSessions,framesChunking}.test.ts",
      "packages/serve/test/{Replay,Backpressure}.test.ts"
    ],
    env: { ...sourceEnv, SKEIN_SERVE_REGISTRY: "cluster" }
  }
}

export default defineConfig({
  ...sourceConditions,
  test: {
    env: sourceEnv,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: each real CLI process costs ~200 MB and a core for ~0.5 s.
    maxWorkers: 2,
    minWorkers: 1,
    projects: [
      {
        extends: true,
        test: {
          name: "default",
          include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
          exclude: ["**/node_modules/**", ...heavy]
        }
      },
      serveOverStore("sqlite"),
      serveOverCluster
    ]
  }
})
