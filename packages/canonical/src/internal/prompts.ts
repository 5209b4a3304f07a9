/**
 * The host's own prompts, shown live. The CLI does not print the user
 * messages it reads from stdin, so without these a client sees a reply with
 * no question until it reloads the history. The host names each prompt's
 * user message (`uuid`), the CLI keeps that uuid in its transcript, and the
 * message opens where the transcript has it: at once when the session is
 * idle, else at the idle that lets the CLI read it. Its ids are the ones the
 * history gives it.
 */
import type { Events, Prompt, State } from "./state.js"
import { update } from "./state.js"
import { onUser } from "./userMessages.js"

const show = (state: State, events: Events, prompt: Prompt): State =>
  update(
    onUser(state, events, {
      message: { role: "user", content: prompt.content },
      uuid: prompt.uuid,
      timestamp: prompt.at,
      synthetic: false,
      toolUseResult: undefined
    }),
    { promptAwaitsIdle: true }
  )

/**
 * A prompt waits while a turn runs, or while the turn of a prompt already
 * shown has not ended: the host's session reads the next one only at an idle,
 * and the CLI's first output of a turn comes well after the prompt.
 */
export const onPrompted = (state: State, events: Events, prompt: Prompt): State =>
  state.busy || state.promptAwaitsIdle ? update(state, { queuedPrompts: [...state.queuedPrompts, prompt] }) : show(state, events, prompt)

/** At an idle: the next queued prompt is the one the CLI reads now. */
export const showQueued = (state: State, events: Events): State => {
  const [next, ...rest] = state.queuedPrompts
  const idle = update(state, { promptAwaitsIdle: false })
  return next === undefined ? idle : show({ ...idle, queuedPrompts: rest }, events, next)
}
