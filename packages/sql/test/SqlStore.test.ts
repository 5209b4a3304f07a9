import { describe, expect, it } from "@effect/vitest"
import { AskLedger, SessionCatalog, SqlStore, StoreUrl } from "@skein/sql"
import { Effect, Layer, Redacted } from "effect"
import * as Net from "node:net"
import { Backing, onBoth } from "./backings.js"

const freePort = Effect.async<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

const storeOn = (url: string) => Effect.flatMap(StoreUrl.parse(url), (u) => SqlStore.make(u))

describe("SqlStore", () => {
  it.effect("a database down at start fails the layer with one StoreUnavailable naming the URL, password redacted", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const url = `postgres://skein:hunter2@127.0.0.1:${port}/skein`
      const error = yield* Effect.flip(Layer.build(SqlStore.layer(url, { connectTimeout: "2 seconds" })).pipe(Effect.scoped))
      expect(error._tag).toBe("StoreUnavailable")
      if (error._tag !== "StoreUnavailable") return
      expect(Redacted.value(error.url)).toBe(url)
      expect(String(error.url)).not.toContain("hunter2")
      expect(error.message).toContain(`postgres://skein:***@127.0.0.1:${port}/skein`)
      expect(error.message).not.toContain("hunter2")
    }))

  it.effect("--store takes sqlite:<file> and postgres://… only", () =>
    Effect.gen(function*() {
      expect(yield* StoreUrl.parse("sqlite:/tmp/x.db")).toEqual({ _tag: "Sqlite", filename: "/tmp/x.db" })
      expect((yield* StoreUrl.parse("postgresql://h/db"))._tag).toBe("Postgres")
      const bad = yield* Effect.flip(StoreUrl.parse("mysql://u:secret@h/db"))
      expect(bad._tag).toBe("BadStoreUrl")
      expect(bad.message).not.toContain("secret")
    }))
})

onBoth((it, name) => {
  it.scoped(`${name}: migrations run once at start; a second start finds them applied`, () =>
    Effect.gen(function*() {
      const url = yield* (yield* Backing).fresh
      yield* Effect.scoped(storeOn(url))
      const store = yield* storeOn(url)
      const rows = yield* store.sql`SELECT COUNT(*) AS n FROM skein_migrations`
      expect(Number(rows[0]!["n"])).toBe(1)
    }))

  it.scoped(`${name}: pending asks are closed with reject and "host restarted" after a restart; a reply to a closed ask finds nothing`, () =>
    Effect.gen(function*() {
      const url = yield* (yield* Backing).fresh
      const ask = (id: string, kind: AskLedger.Kind) =>
        ({ id, kind, cliSessionId: "cli-1", requestId: `req-${id}`, directory: "/work/app", request: { id, permission: "bash" } })
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const ledger = yield* AskLedger.make({ hostName: "box" }).pipe(Effect.provideService(SqlStore.SqlStore, yield* storeOn(url)))
        yield* ledger.open(ask("per_1", "permission"))
        yield* ledger.open(ask("que_1", "question"))
        yield* ledger.open(ask("per_2", "permission"))
        expect(yield* ledger.close("per_2", "once")).toBe(true)
        expect(yield* ledger.close("per_2", "always")).toBe(false)
        return (yield* ledger.pending()).map((a) => a.id)
      }))
      expect(first.sort()).toEqual(["per_1", "que_1"])
      // Another live host's asks are not this host's to close.
      const other = yield* AskLedger.make({ hostName: "other" }).pipe(Effect.provideService(SqlStore.SqlStore, yield* storeOn(url)))
      yield* other.open(ask("per_9", "permission"))
      // The host starts again: its CLIs died with it.
      const ledger = yield* AskLedger.make({ hostName: "box" }).pipe(Effect.provideService(SqlStore.SqlStore, yield* storeOn(url)))
      const closed = yield* ledger.closeOrphans
      expect(closed.map((a) => [a.id, a.kind]).sort()).toEqual([["per_1", "permission"], ["que_1", "question"]])
      expect(closed.find((a) => a.id === "per_1")?.request).toEqual({ id: "per_1", permission: "bash" })
      expect((yield* ledger.pending()).map((a) => a.id)).toEqual(["per_9"])
      expect(yield* ledger.isOpen("per_1")).toBe(false)
      expect(yield* ledger.close("per_1", "once")).toBe(false)
      expect(yield* ledger.close("per_unknown", "once")).toBe(false)
      const reasons = yield* ledger.closeOrphans
      expect(reasons).toEqual([])
      const rows = yield* (yield* storeOn(url)).sql`SELECT reply, reason FROM skein_asks WHERE id = ${"que_1"}`
      expect(rows[0]).toEqual({ reply: "reject", reason: AskLedger.hostRestarted })
    }))

  it.scoped(`${name}: an open ask is found by id; one CLI session's open asks close together and come back`, () =>
    Effect.gen(function*() {
      const url = yield* (yield* Backing).fresh
      const ledger = yield* AskLedger.make({ hostName: "box" }).pipe(Effect.provideService(SqlStore.SqlStore, yield* storeOn(url)))
      const ask = (id: string, cliSessionId: string) =>
        ({ id, kind: "permission" as const, cliSessionId, requestId: `req-${id}`, directory: "/work/app", request: { id, sessionID: "ses_1" } })
      yield* ledger.open(ask("per_1", "cli-1"))
      yield* ledger.open(ask("per_2", "cli-1"))
      yield* ledger.open(ask("per_3", "cli-2"))
      expect((yield* ledger.find("per_1"))?.request).toEqual({ id: "per_1", sessionID: "ses_1" })
      expect(yield* ledger.find("per_unknown")).toBeUndefined()
      const closed = yield* ledger.closeSessionAsks("cli-1", "reject", AskLedger.hostRestarted)
      expect(closed.map((a) => a.id).sort()).toEqual(["per_1", "per_2"])
      expect(yield* ledger.find("per_1")).toBeUndefined()
      expect(yield* ledger.closeSessionAsks("cli-1", "reject", AskLedger.hostRestarted)).toEqual([])
      expect((yield* ledger.pending()).map((a) => a.id)).toEqual(["per_3"])
    }))

  it.scoped(`${name}: the catalog lists every session from rows, newest first, by directory`, () =>
    Effect.gen(function*() {
      const url = yield* (yield* Backing).fresh
      const catalog = yield* SessionCatalog.make.pipe(Effect.provideService(SqlStore.SqlStore, yield* storeOn(url)))
      yield* catalog.put({ sessionId: "ses_a", cliSessionId: "u-a", directory: "/w/1", title: "a", created: 1, updated: 10 })
      yield* catalog.put({ sessionId: "ses_b", cliSessionId: "u-b", directory: "/w/2", title: "b", created: 2, updated: 20, parentId: "ses_a" })
      yield* catalog.touch("ses_a", { title: "renamed", updated: 30 })
      yield* catalog.touch("ses_b", { updated: 5 })
      // Another server on another machine reads the same rows.
      const elsewhere = yield* SessionCatalog.make.pipe(Effect.provideService(SqlStore.SqlStore, yield* storeOn(url)))
      expect((yield* elsewhere.list()).map((e) => [e.sessionId, e.title, e.updated])).toEqual([["ses_a", "renamed", 30], ["ses_b", "b", 20]])
      expect(yield* elsewhere.list("/w/2")).toEqual([{ sessionId: "ses_b", cliSessionId: "u-b", directory: "/w/2", title: "b", created: 2, updated: 20, parentId: "ses_a" }])
      yield* catalog.remove("ses_a")
      expect(yield* elsewhere.get("ses_a")).toBeUndefined()
    }))
})
