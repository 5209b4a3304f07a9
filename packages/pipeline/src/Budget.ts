/**
 * A run's budget: a cap in USD and one in tokens, counted from each turn's
 * `result` (its cost and usage). Crossing a cap fails the run with
 * `BudgetExceeded` at once, which interrupts every session in flight; before
 * that, an item does not start once what is left cannot cover the mean cost
 * of a turn so far.
 */
import { Effect, Option, Ref } from "effect"
import { BudgetExceeded, BudgetInvalid, type Spent } from "./PipelineError.js"

export interface Caps {
  /** Most USD the run may spend. */
  readonly usd?: number | undefined
  /** Most tokens (input, output and cache, summed) the run may use. */
  readonly tokens?: number | undefined
}

/** A turn's bill. */
export interface Charge {
  readonly usd: number
  readonly tokens: number
}

export interface Budget {
  readonly caps: Caps
  readonly spent: Effect.Effect<Spent>
  /** Counts a turn. */
  readonly charge: (charge: Charge) => Effect.Effect<Spent>
  /**
   * Fails with `BudgetExceeded` once a cap is crossed. A stage checks it when
   * an item's turn is counted and its result recorded, so the turn that
   * crosses is not lost; the failure then ends the run.
   */
  readonly check: (progress: Effect.Effect<Progress>) => Effect.Effect<void, BudgetExceeded>
  /** Whether a new turn may start: no cap, no turn counted yet, or what is left covers the mean turn. */
  readonly admits: Effect.Effect<boolean>
}

/** How far the run got, for the error's fields. */
export interface Progress {
  readonly done: number
  readonly pending: number
}

/** Checks the caps: a cap of 0 or below (or NaN) is refused before anything runs. */
export const validate = (caps: Caps): Effect.Effect<Caps, BudgetInvalid> => {
  const bad = (["usd", "tokens"] as const).find((field) => {
    const value = caps[field]
    return value !== undefined && !(value > 0)
  })
  return bad === undefined ? Effect.succeed(caps) : Effect.fail(new BudgetInvalid({ field: bad, value: caps[bad] ?? Number.NaN }))
}

interface Ledger {
  readonly usd: number
  readonly tokens: number
  readonly turns: number
}

const over = (caps: Caps, ledger: Ledger): boolean =>
  (caps.usd !== undefined && ledger.usd > caps.usd) || (caps.tokens !== undefined && ledger.tokens > caps.tokens)

/** Whether the mean turn so far still fits under every cap. */
const covers = (caps: Caps, ledger: Ledger): boolean => {
  if (ledger.turns === 0) return true
  const fits = (cap: number | undefined, spent: number) => cap === undefined || cap - spent >= spent / ledger.turns
  return fits(caps.usd, ledger.usd) && fits(caps.tokens, ledger.tokens)
}

export const make = (caps: Caps): Effect.Effect<Budget, BudgetInvalid> =>
  Effect.gen(function*() {
    yield* validate(caps)
    const ledger = yield* Ref.make<Ledger>({ usd: 0, tokens: 0, turns: 0 })
    const spentOf = (l: Ledger): Spent => ({ usd: l.usd, tokens: l.tokens })
    return {
      caps,
      spent: Effect.map(Ref.get(ledger), spentOf),
      charge: (charge) =>
        Effect.map(
          Ref.updateAndGet(ledger, (l) => ({ usd: l.usd + charge.usd, tokens: l.tokens + charge.tokens, turns: l.turns + 1 })),
          spentOf
        ),
      check: (progress) =>
        Effect.flatMap(Ref.get(ledger), (l) =>
          over(caps, l)
            ? Effect.flatMap(progress, (p) => new BudgetExceeded({ spent: spentOf(l), done: p.done, pending: p.pending, reason: "crossed" }))
            : Effect.void),
      admits: Effect.map(Ref.get(ledger), (l) => covers(caps, l))
    }
  })

/** A budget with no caps. */
export const unlimited: Effect.Effect<Budget> = Effect.orDie(make({}))

/** The caps as the events report them. */
export const describe = (caps: Caps) => ({
  usd: Option.getOrNull(Option.fromNullable(caps.usd)),
  tokens: Option.getOrNull(Option.fromNullable(caps.tokens))
})
