/**
 * ACP session modes are the CLI's permission modes. `default` asks before
 * each tool that changes something; that is where a new session starts,
 * unless the CLI reports another mode from the user's settings.
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"

export const modes: ReadonlyArray<Acp.SessionMode> = [
  { id: "default", name: "Default", description: "Ask before each tool that changes something" },
  { id: "acceptEdits", name: "Accept edits", description: "File edits run unasked; other tools ask" },
  { id: "plan", name: "Plan", description: "Read and plan; change nothing" },
  { id: "bypassPermissions", name: "Bypass permissions", description: "Every tool runs unasked" }
]

export const initialMode = "default"

export const isMode = (id: string): boolean => modes.some((mode) => mode.id === id)

export const state = (current: string): Acp.SessionModeState => ({ currentModeId: current, availableModes: [...modes] })
