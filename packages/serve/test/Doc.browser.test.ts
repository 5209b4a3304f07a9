/**
 * `/doc/ui` in headless Chromium: Swagger UI renders the API from the
 * inlined document and asks nothing of any host but the server.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { chromium } from "playwright-core"
import * as Harness from "./harness.js"

const executablePath = "/usr/bin/chromium"

it.scopedLive("Swagger UI at /doc/ui renders the routes offline", () =>
  Effect.gen(function*() {
    const server = yield* Harness.start(undefined)
    const browser = yield* Effect.acquireRelease(
      Effect.promise(() => chromium.launch({ executablePath, headless: true })),
      (b) => Effect.promise(() => b.close())
    )
    const result = yield* Effect.promise(async () => {
      const context = await browser.newContext({ extraHTTPHeaders: server.headers })
      const page = await context.newPage()
      const elsewhere: Array<string> = []
      const errors: Array<string> = []
      page.on("request", (request) => {
        const url = new URL(request.url())
        if (url.protocol !== "data:" && url.origin !== server.url) elsewhere.push(request.url())
      })
      page.on("pageerror", (error) => errors.push(error.message))
      await page.goto(`${server.url}/doc/ui`)
      await page.waitForSelector(".opblock", { timeout: 30_000 })
      const paths = await page.locator(".opblock-summary-path").allTextContents()
      await context.close()
      return { elsewhere, errors, paths }
    })
    expect(result.elsewhere).toEqual([])
    expect(result.errors).toEqual([])
    expect(result.paths).toEqual(expect.arrayContaining(["/session/{sessionID}/fork", "/question/{requestID}/reply"]))
  }))
