/**
 * ResumeLoader's internal steps, each alone and without a file: decoding
 * the tail, splicing what a boundary preserved, and the chain rules (leaf,
 * walk, logical relinks, usage).
 */
import { describe, expect, it } from "@effect/vitest"
import { Option } from "effect"
import * as Preserved from "../src/internal/preservedSegment.js"
import * as Chain from "../src/internal/resumeChain.js"
import * as Tail from "../src/internal/resumeTail.js"
import * as E from "./fixtures/entries.js"

const tail = (lines: ReadonlyArray<E.Line | string>, options: { sidechain?: boolean; hasBoundary?: boolean } = {}) =>
  Tail.decodeTail(new TextEncoder().encode(E.jsonl(lines)), {
    maxLineBytes: 1024 * 1024,
    sidechain: options.sidechain ?? false,
    hasBoundary: options.hasBoundary ?? false
  })

const parents = (view: Tail.View) => Object.fromEntries([...view.entries].map(([uuid, entry]) => [uuid, entry.parentUuid]))

const tags = (view: Tail.View) => view.diagnostics.map((d) => d._tag)

describe("resumeTail.decodeTail", () => {
  it("keeps chain entries in file order, applies metadata, counts unknown types, keeps bad lines as diagnostics", () => {
    const view = tail([
      E.user("u1", null, "hello"),
      E.title("first"),
      E.blob("x"),
      "{not json",
      E.assistant("a1", "u1", "hi"),
      E.title("second"),
      E.lastPrompt("a1", "hello"),
      E.blob("y")
    ])
    expect(view.order).toEqual(["u1", "a1"])
    expect(view.metadata.customTitle).toBe("second")
    expect(view.metadata.leafUuid).toBe("a1")
    expect(view.unknownTypes).toEqual({ "api-request-blob": 2 })
    expect(tags(view)).toEqual(["Unparseable"])
    expect(view.sessionId).toBe(E.SESSION)
    expect(view.boundary).toBeUndefined()
  })

  it("takes one chain only: main by default, sidechain when asked", () => {
    const lines = [E.user("u1", null, "main"), { ...E.user("s1", null, "side"), isSidechain: true }]
    expect(tail(lines).order).toEqual(["u1"])
    expect(tail(lines, { sidechain: true }).order).toEqual(["s1"])
  })

  it("a boundary entry is the view's boundary only when the tail starts at one", () => {
    const lines = [E.boundary("b1", "a0"), E.summary("s1", "b1")]
    expect(tail(lines).boundary).toBeUndefined()
    expect(tail(lines, { hasBoundary: true }).boundary?.uuid).toBe("b1")
  })
})

describe("preservedSegment", () => {
  const boundary = E.boundary("b1", "a2", { head: "u2", tail: "a2", anchor: "s1", uuids: ["u2", "a2"] })

  it("wants what the boundary names and the tail lacks", () => {
    const view = tail([boundary, E.summary("s1", "b1"), E.user("a2", "s1", "already here")], { hasBoundary: true })
    const info = Option.getOrThrow(Preserved.decodePreserved(view.boundary!))
    expect([...Preserved.wantedUuids(info, new Set(view.entries.keys()))]).toEqual(["u2"])
  })

  it("splices the segment in front with zero usage, hangs its head under the anchor and the anchor's children under its tail", () => {
    const view = tail([boundary, E.summary("s1", "b1"), E.user("u3", "s1", "after compact")], { hasBoundary: true })
    const tailUuids = new Set(view.entries.keys())
    const info = Option.getOrThrow(Preserved.decodePreserved(view.boundary!))
    const wanted = Preserved.wantedUuids(info, tailUuids)
    const before = tail([E.user("u2", "a1", "second question"), E.assistant("a2", "u2", "answer two", { usage: E.usage(2000, 200) })])
    // A backward scan meets the entries last first.
    const found = new Map([...before.entries].reverse())
    const kept = Preserved.splice(view, info, wanted, found, tailUuids)
    expect([...kept]).toEqual(["u2", "a2"])
    expect(view.order).toEqual(["u2", "a2", "b1", "s1", "u3"])
    expect(parents(view)).toMatchObject({ u2: "s1", a2: "u2", u3: "a2" })
    const a2 = view.entries.get("a2")!
    expect(a2.type === "assistant" && a2.message.usage.input_tokens).toBe(0)
    expect(view.diagnostics).toEqual([
      { _tag: "Relinked", uuid: "u3", from: "s1", to: "a2", reason: "preservedSegment" },
      { _tag: "Relinked", uuid: "u2", from: "a1", to: "s1", reason: "preservedSegment" }
    ])
  })

  it("reports what it did not find and relinks nothing without a segment", () => {
    const view = tail([boundary, E.summary("s1", "b1"), E.user("u3", "s1", "after")], { hasBoundary: true })
    const info = Option.getOrThrow(Preserved.decodePreserved(view.boundary!))
    const tailUuids = new Set(view.entries.keys())
    const kept = Preserved.splice(view, info, Preserved.wantedUuids(info, tailUuids), new Map(), tailUuids)
    expect(kept.size).toBe(0)
    expect(view.diagnostics).toEqual([{ _tag: "PreservedMissing", uuids: ["u2", "a2"] }])
    expect(parents(view)).toMatchObject({ u3: "s1" })
  })
})

describe("resumeChain", () => {
  it("the default leaf is last-prompt's leaf extended to its newest descendant", () => {
    const view = tail([
      E.user("u1", null, "q"),
      E.assistant("a1", "u1", "old answer"),
      E.assistant("a1b", "u1", "retried answer"),
      E.user("u2", "a1b", "cut off turn")
    ])
    expect(Chain.defaultLeaf(view, "u1")).toBe("u2")
    expect(view.diagnostics).toEqual([])
  })

  it("a leaf that is not loaded falls back to the last entry, and says so", () => {
    const view = tail([E.user("u1", null, "q"), E.assistant("a1", "u1", "a")])
    expect(Chain.defaultLeaf(view, "gone")).toBe("a1")
    expect(Chain.defaultLeaf(view, undefined)).toBe("a1")
    expect(view.diagnostics).toEqual([{ _tag: "LeafNotFound", leafUuid: "gone" }])
  })

  it("newestDescendant stops at a cycle", () => {
    const view = tail([E.user("x", "y", "x"), E.user("y", "x", "y")])
    expect(Chain.newestDescendant("x", view.entries, view.order)).toBe("y")
  })

  it("walks root to leaf, stopping at an orphan or a cycle", () => {
    const orphan = tail([E.user("u1", "missing", "q"), E.assistant("a1", "u1", "a")])
    expect(Chain.walkChain(orphan, "a1").map((entry) => entry.uuid)).toEqual(["u1", "a1"])
    expect(orphan.diagnostics).toEqual([{ _tag: "Orphan", uuid: "u1", parentUuid: "missing" }])
    const cycle = tail([E.user("x", "y", "x"), E.user("y", "x", "y")])
    expect(Chain.walkChain(cycle, "x").map((entry) => entry.uuid)).toEqual(["y", "x"])
    expect(tags(cycle)).toEqual(["Cycle"])
    expect(Chain.walkChain(cycle, undefined)).toEqual([])
  })

  it("relinks an entry cut from its parent under its logical parent, never the boundary", () => {
    const view = tail([
      E.boundary("b1", "u0"),
      E.user("u0", null, "logical parent"),
      { ...E.user("u1", null, "cut"), logicalParentUuid: "u0" },
      { ...E.user("u2", "u1", "linked"), logicalParentUuid: "u0" }
    ], { hasBoundary: true })
    Chain.relinkLogicalParents(view, view.entries.keys(), view.boundary)
    expect(parents(view)).toMatchObject({ b1: null, u1: "u0", u2: "u1" })
    expect(view.diagnostics).toEqual([{ _tag: "Relinked", uuid: "u1", from: null, to: "u0", reason: "logicalParent" }])
  })

  it("counts one API message once, and preserved messages not at all", () => {
    const view = tail([
      E.user("u1", null, "q"),
      E.assistant("p1", "u1", "preserved", { usage: E.usage(1000, 100) }),
      E.assistant("a1", "p1", "part one", { id: "msg_1", usage: E.usage(10, 1) }),
      E.assistant("a2", "a1", "part two", { id: "msg_1", usage: E.usage(10, 1) }),
      E.assistant("a3", "a2", "next", { id: "msg_2", usage: { ...E.usage(5, 2), cache_read_input_tokens: 7 } })
    ])
    const chain = Chain.walkChain(view, "a3")
    expect(Chain.chainUsage(chain, new Set(["p1"]))).toEqual({
      input_tokens: 15,
      output_tokens: 3,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 7
    })
  })
})
