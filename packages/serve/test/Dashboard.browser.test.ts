/**
 * The dashboard in headless Chromium (playwright-core driving the Debian
 * `chromium`), against skein serve with the real CLI and FakeModel. Every
 * test fails on any console error in the page. Screenshots go to a temp
 * folder printed at the start.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Exit, Schema, Scope } from "effect"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import * as Harness from "./harness.js"

const executablePath = "/usr/bin/chromium"
const haveChromium = Fs.existsSync(executablePath)
if (!haveChromium) {
  console.error(`\n!!!!!!!!\n!!! Dashboard browser tests SKIPPED: ${executablePath} is missing (apt-get install chromium)\n!!!!!!!!\n`)
}

const shots = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-dashboard-shots-"))
console.log(`dashboard screenshots: ${shots}`)

const launch = Effect.acquireRelease(
  Effect.promise(() => chromium.launch({ executablePath, headless: true })),
  (browser) => Effect.promise(() => browser.close())
)

interface Opened {
  readonly page: Page
  /** Console errors and uncaught exceptions, in order. */
  readonly errors: Array<string>
}

const open = (browser: Browser, width = 1280) =>
  Effect.promise(async (): Promise<Opened> => {
    const context = await browser.newContext({ viewport: { width, height: 900 } })
    const page = await context.newPage()
    const errors: Array<string> = []
    page.on("console", (message) => {
      if (message.type() === "error") errors.push(message.text())
    })
    page.on("pageerror", (error) => errors.push(String(error)))
    return { page, errors }
  })

const api = (server: Harness.Running, method: string, path: string, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...server.headers, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
  })

const Identified = Schema.Struct({ id: Schema.String })

const createSession = (server: Harness.Running, title: string) =>
  Effect.map(api(server, "POST", "/session", { title }), (r) => {
    expect(r.status).toBe(200)
    return Schema.decodeUnknownSync(Identified)(r.body)
  })

/** The text of the view's assistant messages, in order. */
const assistantTexts = (page: Page) => page.locator(".message-assistant .text").allTextContents()

/** The assistant's text as soon as there is any (the page's CSP forbids evaluating strings, so this polls). */
const firstText = async (page: Page): Promise<string> => {
  for (;;) {
    const text = (await assistantTexts(page)).join("")
    if (text.length > 0) return text
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Presses Tab until `selector` has the focus, then Enter; how many presses it took. */
const tabTo = async (page: Page, selector: string): Promise<number> => {
  for (let presses = 1; presses <= 20; presses++) {
    await page.keyboard.press("Tab")
    if (await page.locator(`${selector}:focus`).count() > 0) {
      await page.keyboard.press("Enter")
      return presses
    }
  }
  throw new Error(`Tab never reached ${selector}`)
}

const sendPrompt = async (page: Page, text: string) => {
  await page.locator("#prompt").fill(text)
  await page.locator("#prompt").press("Enter")
}

const headerStatus = (page: Page, status: string) => page.locator(`#session[data-status="${status}"]`).waitFor()

const freePort = Effect.promise(() =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })
)

describe.skipIf(!haveChromium)("the dashboard in Chromium, against skein serve with the real CLI", () => {
  it.scopedLive("the login form lets in; the list shows a session; a typed prompt streams its reply into the view", () =>
    Effect.gen(function*() {
      const reply = "Words stream into the dashboard two at a time, so the view fills in while the model writes."
      const model = yield* FakeModel.make({ replies: [FakeModel.withDelay(FakeModel.text(reply), "120 millis")] })
      const server = yield* Harness.start(model)
      const session = yield* createSession(server, "dashboard first")
      const browser = yield* launch
      const { errors, page } = yield* open(browser)
      const seen = yield* Effect.promise(async () => {
        await page.goto(`${server.url}/`)
        await page.getByLabel("Token").fill(Harness.token)
        await page.getByLabel("Token").press("Enter")
        const row = page.locator(`#session-list li[data-id="${session.id}"]`)
        await row.getByText("dashboard first").waitFor()
        const listed = { status: await row.getAttribute("data-status"), text: await row.textContent() }
        // Keyboard only: Tab to the session's row, Enter opens it.
        const tabs = await tabTo(page, `#session-list li[data-id="${session.id}"] a`)
        await page.locator("#session-title", { hasText: "dashboard first" }).waitFor()
        await sendPrompt(page, "Say something")
        await page.locator(".message-user .text", { hasText: "Say something" }).waitFor()
        // Part of the reply is on screen before the rest.
        const partial = await firstText(page)
        await page.locator(".message-assistant .text", { hasText: reply }).waitFor()
        await headerStatus(page, "idle")
        await page.locator(".message-assistant .step").first().waitFor()
        const step = await page.locator(".step").first().textContent()
        const texts = await assistantTexts(page)
        // Fork: a new session with the same history, opened at once.
        await page.getByRole("button", { name: "Fork" }).click()
        await page.locator("#session-title", { hasText: "dashboard first (fork)" }).waitFor()
        await page.locator(".message-assistant .text", { hasText: reply }).waitFor()
        const fork = { hash: new URL(page.url()).hash, rows: await page.locator("#session-list li").count(), texts: await page.locator("#messages .text").allTextContents() }
        // Signing out drops the cookie: a reload shows the form again.
        await page.getByRole("button", { name: "Sign out" }).click()
        await page.getByLabel("Token").waitFor()
        await page.reload()
        await page.getByLabel("Token").waitFor()
        const signedOut = await page.locator("#app").isHidden()
        return { listed, tabs, partial, texts, step, fork, signedOut }
      })
      expect(seen.listed.status).toBe("idle")
      // From the login form: New session, then the row (at most: skip link, home, Sign out, New session, row).
      expect(seen.tabs).toBeLessThanOrEqual(5)
      expect(seen.listed.text).toContain(server.dirs.cwd)
      expect(reply.startsWith(seen.partial)).toBe(true)
      expect(seen.partial.length).toBeLessThan(reply.length)
      expect(seen.texts).toEqual([reply])
      expect(seen.step).toMatch(/step end_turn · \d+ in \/ \d+ out/)
      expect(seen.fork.hash).toMatch(/^#\/session\/ses_/)
      expect(seen.fork.hash).not.toContain(session.id)
      expect(seen.fork.rows).toBe(2)
      expect(seen.fork.texts).toEqual(["Say something", reply])
      expect(seen.signedOut).toBe(true)
      expect(errors).toEqual([])
    }))

  it.scopedLive("a permission ask shows its buttons; Allow runs the tool, Deny denies, one answered elsewhere disappears", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.toolUse("Bash", { command: "touch allowed.txt && echo dashboard-allowed-output" }),
          FakeModel.text("Ran it."),
          FakeModel.toolUse("Bash", { command: "touch denied.txt" }),
          FakeModel.text("Skipped it."),
          FakeModel.toolUse("Bash", { command: "touch elsewhere.txt" }),
          FakeModel.text("Answered elsewhere.")
        ]
      })
      const server = yield* Harness.start(model)
      const session = yield* createSession(server, "asks")
      const browser = yield* launch
      const { errors, page } = yield* open(browser)
      const ask = page.locator(".ask")

      const allowed = yield* Effect.promise(async () => {
        await page.goto(`${server.url}/?token=${Harness.token}#/session/${session.id}`)
        await page.locator("#session-title", { hasText: "asks" }).waitFor()
        await sendPrompt(page, "Run the command")
        await ask.waitFor()
        const buttons = await ask.getByRole("button").allTextContents()
        const listed = await page.locator(`#session-list li[data-id="${session.id}"]`).getAttribute("data-status")
        // The screenshots: a session with a pending ask, and the list, at both widths.
        await page.screenshot({ path: Path.join(shots, "session-permission-1280.png"), fullPage: true })
        const title = await page.locator("#session-title").textContent()
        await page.goto(`${server.url}/#/`)
        await page.locator("#session-list").getByText("waiting for permission").waitFor()
        await page.screenshot({ path: Path.join(shots, "list-1280.png") })
        await page.goBack()
        await ask.waitFor()
        await page.setViewportSize({ width: 390, height: 844 })
        await page.screenshot({ path: Path.join(shots, "session-permission-390.png"), fullPage: true })
        await page.getByRole("link", { name: "← Sessions" }).click()
        await page.locator("#session-list").getByText("waiting for permission").waitFor()
        await page.screenshot({ path: Path.join(shots, "list-390.png"), fullPage: true })
        await page.goBack()
        await ask.waitFor()
        await page.setViewportSize({ width: 1280, height: 900 })
        // Keyboard: focus the button and press Enter.
        await ask.getByRole("button", { name: "Allow once" }).focus()
        await page.keyboard.press("Enter")
        await ask.waitFor({ state: "detached" })
        await page.locator(".message-assistant .text", { hasText: "Ran it." }).waitFor()
        const tool = page.locator(".tool").first()
        return { buttons, listed, title, status: await tool.getAttribute("data-status"), output: await tool.locator(".output").textContent() }
      })
      expect(allowed.buttons).toEqual(["Allow once", "Always", "Deny"])
      expect(allowed.listed).toBe("waiting for permission")
      // Still the title the session was created with, after the CLI's own session.updated.
      expect(allowed.title).toBe("asks")
      expect(allowed.status).toBe("completed")
      expect(allowed.output).toContain("dashboard-allowed-output")
      const afterAllow = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(JSON.stringify(afterAllow.body)).toContain("dashboard-allowed-output")

      const denied = yield* Effect.promise(async () => {
        await sendPrompt(page, "Make the file")
        await ask.waitFor()
        await ask.getByRole("button", { name: "Deny" }).click()
        await ask.waitFor({ state: "detached" })
        await page.locator(".message-assistant .text", { hasText: "Skipped it." }).waitFor()
        return page.locator(".tool").nth(1).getAttribute("data-status")
      })
      expect(denied).toBe("error")
      expect(Fs.existsSync(Path.join(server.dirs.cwd, "allowed.txt"))).toBe(true)
      expect(Fs.existsSync(Path.join(server.dirs.cwd, "denied.txt"))).toBe(false)
      const afterDeny = yield* model.awaitRequest(3, FakeModel.isConversation)
      expect(JSON.stringify(afterDeny.body)).toContain("is_error")

      yield* Effect.promise(async () => {
        await sendPrompt(page, "Make another file")
        await ask.waitFor()
      })
      const pending = yield* api(server, "GET", "/permission")
      const asked = Schema.decodeUnknownSync(Schema.Array(Identified))(pending.body)
      expect(asked).toHaveLength(1)
      expect((yield* api(server, "POST", `/permission/${asked[0]!.id}/reply`, { reply: "once" })).status).toBe(200)
      yield* Effect.promise(async () => {
        await ask.waitFor({ state: "detached" })
        await page.locator(".message-assistant .text", { hasText: "Answered elsewhere." }).waitFor()
      })
      expect(Fs.existsSync(Path.join(server.dirs.cwd, "elsewhere.txt"))).toBe(true)
      expect(errors).toEqual([])
    }))

  it.scopedLive("a retry shows as its own part, reasoning is collapsed until opened, a compaction shows its marker", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.withRetryAfter(FakeModel.overloaded, 200),
          FakeModel.combine(FakeModel.thinking("Thinking it over."), FakeModel.text("After a retry."))
        ]
      })
      const server = yield* Harness.start(model)
      const session = yield* createSession(server, "parts")
      const browser = yield* launch
      const { errors, page } = yield* open(browser)
      const seen = yield* Effect.promise(async () => {
        await page.goto(`${server.url}/?token=${Harness.token}#/session/${session.id}`)
        await page.locator("#session-title", { hasText: "parts" }).waitFor()
        await sendPrompt(page, "Think, then answer")
        await page.locator(".message-assistant .text", { hasText: "After a retry." }).waitFor()
        const retry = await page.locator(".retry").first().textContent()
        const reasoning = page.locator("details.reasoning")
        const closed = { open: await reasoning.getAttribute("open"), visible: await reasoning.getByText("Thinking it over.").isVisible() }
        await reasoning.locator("summary").click()
        const opened = await reasoning.getByText("Thinking it over.").isVisible()
        await headerStatus(page, "idle")
        await sendPrompt(page, "/compact")
        await page.locator(".marker", { hasText: "context compacted" }).waitFor()
        return { retry, closed, opened }
      })
      expect(seen.retry).toMatch(/^retry 1: /)
      expect(seen.closed).toEqual({ open: null, visible: false })
      expect(seen.opened).toBe(true)
      expect(errors).toEqual([])
    }))

  it.scopedLive("the task list shows a background task running, then completed with its summary (CLI 2.1.332's task_updated)", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.toolUse("Bash", { command: "sleep 3; echo background done", description: "Wait, then print", run_in_background: true }),
          FakeModel.text("It runs in the background.")
        ],
        fallback: FakeModel.text("The background command finished.")
      })
      // Background tasks exist only without --bare.
      const server = yield* Harness.start(model, { bare: false })
      const session = yield* createSession(server, "tasks")
      const browser = yield* launch
      const { errors, page } = yield* open(browser)
      const seen = yield* Effect.promise(async () => {
        await page.goto(`${server.url}/?token=${Harness.token}#/session/${session.id}`)
        await page.locator("#session-title", { hasText: "tasks" }).waitFor()
        await sendPrompt(page, "Run it in the background")
        const row = page.locator("#task-list li", { hasText: "Wait, then print" })
        // The CLI may ask before it runs the command: allowed from the page.
        const allow = page.locator(".ask").getByRole("button", { name: "Allow once" })
        await Promise.race([allow.waitFor(), row.waitFor()])
        if (await allow.count() > 0) await allow.click()
        await row.locator(".badge-running").waitFor()
        const running = await row.textContent()
        await row.locator(".badge-completed").waitFor({ timeout: 60_000 })
        await page.screenshot({ path: Path.join(shots, "tasks-1280.png"), fullPage: true })
        return { running, completed: await row.textContent(), rows: await page.locator("#task-list li").count() }
      })
      expect(seen.running).toContain("running")
      expect(seen.completed).toContain("completed")
      expect(seen.completed).toContain("completed (exit code 0)")
      expect(seen.rows).toBe(1)
      expect(errors).toEqual([])
    }), 180_000)

  it.scopedLive("Abort stops a streaming turn, and the reply it cut short is marked interrupted", () =>
    Effect.gen(function*() {
      const reply = "one two three four five six seven eight nine ten ".repeat(20)
      const model = yield* FakeModel.make({ replies: [FakeModel.withDelay(FakeModel.text(reply), "100 millis")] })
      const server = yield* Harness.start(model)
      const session = yield* createSession(server, "abort me")
      const browser = yield* launch
      const { errors, page } = yield* open(browser)
      const texts = yield* Effect.promise(async () => {
        await page.goto(`${server.url}/?token=${Harness.token}#/session/${session.id}`)
        await page.locator("#session-title", { hasText: "abort me" }).waitFor()
        await sendPrompt(page, "Count for a long time")
        await page.locator(".message-assistant .text").first().waitFor()
        await headerStatus(page, "busy")
        await page.getByRole("button", { name: "Abort" }).click()
        await headerStatus(page, "idle")
        // The reply it cut short is marked, not shown as an error.
        await page.locator(".message-assistant .interrupted").waitFor()
        expect(await page.locator(".message-assistant .error").count()).toBe(0)
        return assistantTexts(page)
      })
      const shown = texts.join("")
      expect(shown.length).toBeGreaterThan(0)
      expect(shown.length).toBeLessThan(reply.length)
      // The turn is over: what the server holds for it is no longer growing.
      const status = yield* api(server, "GET", "/session/status")
      expect(status.body[session.id]).toBeUndefined()
      expect(errors).toEqual([])
    }))

  it.scopedLive("after the server restarts, the page reconnects, shows the same history and streams again", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.text("Before the restart."), FakeModel.withDelay(FakeModel.text("After the restart, streamed live."), "50 millis")]
      })
      const dirs = yield* ClaudeCli.offlineDirs("skein-dashboard-restart-")
      const port = yield* freePort
      const first = yield* Scope.make()
      const server = yield* Harness.start(model, { dirs, port, dropConnections: true }).pipe(Scope.extend(first))
      const browser = yield* launch
      const { errors, page } = yield* open(browser)
      yield* Effect.promise(async () => {
        await page.goto(`${server.url}/?token=${Harness.token}`)
        await page.getByRole("button", { name: "New session" }).click()
        await page.locator("#session:not([hidden])").waitFor()
        await sendPrompt(page, "one")
        await page.locator(".message-assistant .text", { hasText: "Before the restart." }).waitFor()
        await headerStatus(page, "idle")
      })
      const id = new URL(page.url()).hash.replace("#/session/", "")

      yield* Scope.close(first, Exit.void)
      yield* Effect.promise(() => page.locator(`#connection[data-state="reconnecting"]`).waitFor())
      const errorsWhileDown = errors.splice(0)
      yield* Harness.start(model, { dirs, port, dropConnections: true })
      const after = yield* Effect.promise(async () => {
        await page.locator(`#connection[data-state="live"]`).waitFor({ timeout: 30_000 })
        const kept = await page.locator("#messages .text").allTextContents()
        await sendPrompt(page, "two")
        await page.locator(".message-assistant .text", { hasText: "After the restart, streamed live." }).waitFor()
        await headerStatus(page, "idle")
        await page.reload()
        await page.locator(".message-assistant .text", { hasText: "After the restart, streamed live." }).waitFor()
        return { kept, reloaded: await page.locator("#messages .text").allTextContents(), listed: await page.locator(`#session-list li[data-id="${id}"]`).count() }
      })
      expect(after.kept).toEqual(["one", "Before the restart."])
      expect(after.reloaded).toEqual(["one", "Before the restart.", "two", "After the restart, streamed live."])
      expect(after.listed).toBe(1)
      // While the server was down, Chromium reports the cut and refused stream itself: nothing else.
      expect(errorsWhileDown.filter((e) => !/net::ERR_(INCOMPLETE_CHUNKED_ENCODING|CONNECTION_REFUSED|CONNECTION_RESET|EMPTY_RESPONSE)/.test(e))).toEqual([])
      expect(errors).toEqual([])
    }))
})
