import { describe, expect, it } from "@effect/vitest"
import * as AppendOnlySet from "../src/internal/appendOnlySet.js"

describe("AppendOnlySet", () => {
  it("grows along a line of versions, each keeping what it held", () => {
    const v0 = AppendOnlySet.empty<string>()
    const v1 = AppendOnlySet.add(v0, "a")
    const v2 = AppendOnlySet.add(v1, "b")
    expect([AppendOnlySet.has(v0, "a"), AppendOnlySet.has(v1, "a"), AppendOnlySet.has(v1, "b")]).toEqual([false, true, false])
    expect([AppendOnlySet.has(v2, "a"), AppendOnlySet.has(v2, "b")]).toEqual([true, true])
    expect(AppendOnlySet.add(v2, "a")).toBe(v2)
  })

  it("adding to an older version branches without touching the newer one", () => {
    const v1 = AppendOnlySet.add(AppendOnlySet.empty<string>(), "a")
    const v2 = AppendOnlySet.add(v1, "b")
    const w2 = AppendOnlySet.add(v1, "c")
    expect([AppendOnlySet.has(w2, "a"), AppendOnlySet.has(w2, "b"), AppendOnlySet.has(w2, "c")]).toEqual([true, false, true])
    expect([AppendOnlySet.has(v2, "b"), AppendOnlySet.has(v2, "c")]).toEqual([true, false])
    // The older version re-adding what only a branch holds still branches.
    const x2 = AppendOnlySet.add(v1, "b")
    expect([AppendOnlySet.has(x2, "b"), AppendOnlySet.has(x2, "c"), AppendOnlySet.has(w2, "b")]).toEqual([true, false, false])
    const w3 = AppendOnlySet.add(w2, "d")
    expect([AppendOnlySet.has(w3, "d"), AppendOnlySet.has(v2, "d"), AppendOnlySet.has(x2, "d")]).toEqual([true, false, false])
  })
})
