/**
 * Which listed session a query names, and which queries text typed by a
 * person stands for. Pure: the listing is done by the caller.
 */
import * as Path from "node:path"
import type { Query, SessionInfo } from "../SessionIndex.js"
import { transcriptExtension } from "../TranscriptLayout.js"

/**
 * The session `query` names in `all` (most recent first): by resolved path,
 * by id, or by title, an exact custom or AI title before a case-blind match
 * of the shown title.
 */
export const pick = (all: ReadonlyArray<SessionInfo>, query: Query): SessionInfo | undefined => {
  switch (query._tag) {
    case "Path": {
      const path = Path.resolve(query.path)
      return all.find((info) => info.path === path)
    }
    case "Id":
      return all.find((info) => info.sessionId === query.sessionId)
    case "Title":
      return all.find((info) => info.customTitle === query.title || info.aiTitle === query.title) ??
        all.find((info) => info.title?.toLowerCase() === query.title.toLowerCase())
  }
}

/** The queries to try for `text`, in order: a path (when it looks like one), an id, a title. */
export const candidates = (text: string): ReadonlyArray<Query> => {
  const byName: ReadonlyArray<Query> = [{ _tag: "Id", sessionId: text }, { _tag: "Title", title: text }]
  return text.endsWith(transcriptExtension) || text.includes(Path.sep) ? [{ _tag: "Path", path: text }, ...byName] : byName
}
