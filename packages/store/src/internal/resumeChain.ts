/**
 * From the repaired view to the conversation: relinking entries cut from
 * their parent, choosing the leaf, walking the parent chain back from it,
 * and counting the chain's usage. Pure over the view; what they repair or
 * notice goes to its diagnostics.
 */
import type { Transcript } from "@skein/protocol"
import type { Usage } from "../ResumeLoader.js"
import { withParent } from "./preservedSegment.js"
import type { View } from "./resumeTail.js"

/**
 * Entries of the tail cut from their parent (null or not loaded) whose
 * logical parent is loaded hang under it. The boundary stays a root.
 */
export const relinkLogicalParents = (
  view: View,
  tailUuids: Iterable<string>,
  boundary: Transcript.SystemEntry | undefined
): void => {
  const { entries, diagnostics } = view
  for (const uuid of tailUuids) {
    const entry = entries.get(uuid)!
    if (entry === boundary) continue
    const logical = entry.logicalParentUuid
    if (logical === undefined || logical === null || !entries.has(logical) || logical === uuid) continue
    if (entry.parentUuid === null || !entries.has(entry.parentUuid)) {
      entries.set(uuid, withParent(entry, logical))
      diagnostics.push({ _tag: "Relinked", uuid, from: entry.parentUuid, to: logical, reason: "logicalParent" })
    }
  }
}

/** Follows the newest child (in file order) down from `uuid`, so a turn written after `last-prompt` is kept. */
export const newestDescendant = (
  uuid: string,
  entries: ReadonlyMap<string, Transcript.ChainEntry>,
  order: ReadonlyArray<string>
): string => {
  const newestChild = new Map<string, string>()
  for (const id of order) {
    const parent = entries.get(id)?.parentUuid
    if (parent !== null && parent !== undefined) newestChild.set(parent, id)
  }
  const seen = new Set<string>([uuid])
  let current = uuid
  for (let child = newestChild.get(current); child !== undefined && !seen.has(child); child = newestChild.get(current)) {
    seen.add(child)
    current = child
  }
  return current
}

/** `last-prompt`'s leaf extended to its newest descendant, else the last chain entry in file order. */
export const defaultLeaf = (view: View, leafUuid: string | undefined): string | undefined => {
  const { entries, order, diagnostics } = view
  if (leafUuid !== undefined && entries.has(leafUuid)) return newestDescendant(leafUuid, entries, order)
  if (leafUuid !== undefined) diagnostics.push({ _tag: "LeafNotFound", leafUuid })
  return order[order.length - 1]
}

/** The chain from its root to `leaf`; stops at a cycle or a missing parent, and says so. */
export const walkChain = (view: View, leaf: string | undefined): Array<Transcript.ChainEntry> => {
  const { entries, diagnostics } = view
  const chain: Array<Transcript.ChainEntry> = []
  const seen = new Set<string>()
  let current = leaf === undefined ? undefined : entries.get(leaf)
  while (current !== undefined) {
    if (seen.has(current.uuid)) {
      diagnostics.push({ _tag: "Cycle", uuid: current.uuid })
      break
    }
    seen.add(current.uuid)
    chain.push(current)
    const parent = current.parentUuid
    if (parent === null) break
    const next = entries.get(parent)
    if (next === undefined) {
      diagnostics.push({ _tag: "Orphan", uuid: current.uuid, parentUuid: parent })
      break
    }
    current = next
  }
  return chain.reverse()
}

const hasToolResult = (entry: Transcript.ChainEntry): boolean =>
  entry.type === "user" && typeof entry.message.content !== "string" &&
  entry.message.content.some((block) => block.type === "tool_result")

/**
 * Parallel tool calls leave all but one of their results off the chain: the
 * CLI writes one entry per tool_use block, each result hangs under its own
 * tool_use, and only the last result carries the conversation on. The CLI
 * puts those sibling results back when it resumes; so does this. Each
 * off-chain result whose parent is a block of one assistant message on the
 * chain goes right after that message's last block, in file order, before
 * the result that carries the chain.
 */
export const recoverSiblingToolResults = (
  view: View,
  chain: ReadonlyArray<Transcript.ChainEntry>
): Array<Transcript.ChainEntry> => {
  const onChain = new Set(chain.map((entry) => entry.uuid))
  const siblingsOf = new Map<string, Array<Transcript.ChainEntry>>()
  for (const uuid of view.order) {
    const entry = view.entries.get(uuid)
    if (entry === undefined || onChain.has(uuid) || !hasToolResult(entry)) continue
    const parent = entry.parentUuid
    if (parent === null || parent === undefined || !onChain.has(parent)) continue
    const list = siblingsOf.get(parent) ?? []
    list.push(entry)
    siblingsOf.set(parent, list)
  }
  if (siblingsOf.size === 0) return [...chain]
  const out: Array<Transcript.ChainEntry> = []
  let pending: Array<Transcript.ChainEntry> = []
  chain.forEach((entry, i) => {
    out.push(entry)
    pending.push(...(siblingsOf.get(entry.uuid) ?? []))
    const next = chain[i + 1]
    const sameMessage = next !== undefined && next.type === "assistant" && entry.type === "assistant" &&
      next.message.id === entry.message.id
    if (!sameMessage && pending.length > 0) {
      out.push(...pending)
      pending = []
    }
  })
  return out
}

/** Usage of the chain, counting each API message once (its blocks share an id); preserved messages count none. */
export const chainUsage = (chain: ReadonlyArray<Transcript.ChainEntry>, preserved: ReadonlySet<string>): Usage => {
  const usage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
  const counted = new Set<string>()
  for (const entry of chain) {
    if (entry.type !== "assistant" || preserved.has(entry.uuid) || counted.has(entry.message.id)) continue
    counted.add(entry.message.id)
    const u = entry.message.usage
    usage.input_tokens += u.input_tokens
    usage.output_tokens += u.output_tokens
    usage.cache_creation_input_tokens += u.cache_creation_input_tokens ?? 0
    usage.cache_read_input_tokens += u.cache_read_input_tokens ?? 0
  }
  return usage
}
