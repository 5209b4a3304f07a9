/** skein's own prompts for the memory workers. */
import type { Limits } from "../MemoryFolder.js"

const format = (memoryDir: string, limits: Limits) =>
  [
    `The memory folder is ${memoryDir}.`,
    "Each memory is one file holding one fact, with frontmatter: name (a short kebab-case slug), description (one line),",
    "and metadata.type (user, feedback, project or reference). MEMORY.md indexes them, one line per memory:",
    `\`- [Title](file.md) — hook\`, each line at most ${limits.maxLineChars} characters, the whole file under ${Math.floor(limits.maxIndexBytes / 1024)} KB.`
  ].join("\n")

export const extraction = (options: {
  readonly memoryDir: string
  readonly messages: number
  readonly index: string
  readonly limits: Limits
}): string =>
  [
    "skein memory extraction.",
    `Read only the last ${options.messages} messages of the conversation above and keep what will still matter in later sessions:`,
    "who the user is, guidance they gave, ongoing work and its constraints, pointers to outside resources.",
    "Skip what the code or git history already records and what only mattered to this conversation.",
    format(options.memoryDir, options.limits),
    "Update an existing memory rather than adding a duplicate; write dates as absolute dates. If nothing is worth keeping, write nothing.",
    "The index now reads:",
    options.index === "" ? "(empty)" : options.index
  ].join("\n")

export const dream = (options: {
  readonly memoryDir: string
  readonly projectDir: string
  readonly index: string
  readonly limits: Limits
}): string =>
  [
    "skein memory consolidation (dream).",
    format(options.memoryDir, options.limits),
    `The project's session transcripts are the .jsonl files in ${options.projectDir}.`,
    "Work in four phases:",
    "1. Orient: list the memory folder, read MEMORY.md, skim the topic files.",
    "2. Gather: daily logs first, then memories that look stale, then narrow greps of the transcripts (never read them whole).",
    "3. Consolidate: merge overlapping memories into one existing file, turn relative dates into absolute ones, delete facts that later ones contradict.",
    "4. Prune and index: remove merged or empty files and rewrite MEMORY.md so every memory has exactly one short line.",
    "You may only run ls, cat, grep, head, tail and wc, and only write inside the memory folder.",
    "The index now reads:",
    options.index === "" ? "(empty)" : options.index
  ].join("\n")
