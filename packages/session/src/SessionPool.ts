/**
 * A warm pool: CLI processes started ahead of their sessions, so a session
 * does not wait for the CLI to boot.
 *
 * For each option profile the pool keeps `size` processes on the bus with
 * `initialize` answered, each waiting for its first user message.
 * `Session.start`, with this service in context, takes one whose profile
 * matches — the same process (cwd, model, flags, env, executable) and the
 * same `initialize` (system prompt, agents, output schema, and the hooks and
 * toolkits in the pool's context) — and the pool starts a replacement in the
 * background. Other options start cold, as without a pool. Without the
 * service there is no pool: it is off by default.
 *
 * A process taken belongs to its session's Scope from then on; the ones
 * still held are stopped when the pool's Scope closes.
 *
 * With `claim`, a spare is parked (`--await-claim`): it is no session until
 * the pool claims it for the one that takes it (see `internal/claim.ts`), so
 * a spare never taken leaves no transcript behind, and it serves a session
 * in any working directory, not only its profile's.
 */
import { ProcessHost } from "@skein/kernel"
import type { Control } from "@skein/protocol"
import {
  Config,
  Context,
  Duration,
  Effect,
  Exit,
  FiberSet,
  Layer,
  Option,
  Ref,
  Schedule,
  Scope,
  Subscribable,
  SubscriptionRef
} from "effect"
import { Hooks } from "./Hooks.js"
import * as Claim from "./internal/claim.js"
import * as CliRequests from "./internal/cliRequests.js"
import * as Launch from "./internal/launch.js"
import * as Warmup from "./internal/warmup.js"
import type { SessionOptions } from "./Session.js"
import { Toolkits } from "./Toolkit.js"

export interface Options {
  /** The sessions to keep processes ready for. */
  readonly profiles: ReadonlyArray<SessionOptions>
  /** Warm processes per profile; 0 keeps none. */
  readonly size: number
  /**
   * How long after a hand-over its replacement starts; none by default. A
   * CLI booting takes a core for about a second: on a small machine, a delay
   * keeps it off the first turn of the session just handed over.
   */
  readonly replenishDelay?: Duration.DurationInput | undefined
  /**
   * Control requests sent to each held process once `initialize` is
   * answered, to warm the code its first turn runs: none by default;
   * `warmup` (below) is the set that helped. Each is answered before the
   * process is held; answers with an error (a release that does not know the
   * request) are fine, and a process that does not answer within 5 s is
   * held as it is (the 2.0 line answers none of them). The requests here
   * are read-only: they send no Messages request and write nothing to the
   * transcript.
   */
  readonly warmup?: ReadonlyArray<Control.HostRequestPayload> | undefined
  /**
   * Park each spare with `--await-claim` and claim it (`claim_session`, with
   * the session's cwd) when a session takes it; off by default. The CLI then
   * defers its session-scoped start-up (cwd, CLAUDE.md and git context,
   * SessionStart hooks, the transcript) to the claim, which the session waits
   * for: `bench/warmup.ts` measures what that costs. A CLI that does not know
   * the flag (it exits at once saying so: the 2.0 line) keeps spares as
   * without this option; a claim refused or unanswered stops that spare and
   * the session starts cold.
   *
   * A parked spare is no session yet, so it also serves options that differ
   * from its profile's only in `cwd`: the claim moves it there (the profile's
   * cwd is only where it waits). That is what this option is for: on CLI
   * 2.1.332 the claim's round trip makes a pooled first turn slower than
   * `warmup` alone (see the bench), but far faster than a cold start in a
   * folder no profile names.
   */
  readonly claim?: boolean | undefined
}

/**
 * The warm-up that helped (see `bench/warmup.ts`): `get_context_usage` in its
 * full detail builds the system prompt and the tool list the first turn
 * sends, and its client, as the first turn would. It asks the API to count
 * tokens (`/v1/messages/count_tokens`, four requests on CLI 2.1.332), and
 * sends no Messages request. The `summary` detail counts no tools, and
 * helped less.
 */
export const warmup: ReadonlyArray<Control.HostRequestPayload> = [{ subtype: "get_context_usage" }]

export class SessionPool extends Context.Tag("@skein/session/SessionPool")<SessionPool, {
  /**
   * A warm process launched with these options and this `initialize`, if the
   * pool holds one; it then belongs to the current Scope, and a replacement
   * starts. None when the pool keeps none for them, or has none ready.
   */
  readonly take: (
    options: Launch.LaunchOptions,
    initialize: Control.Initialize
  ) => Effect.Effect<Option.Option<Launch.Launched>, never, Scope.Scope>
  /** The pids of the processes held now, ready to be taken. */
  readonly held: Subscribable.Subscribable<ReadonlyArray<number>>
}>() {}

interface Warm {
  readonly key: string
  readonly launched: Launch.Launched
  /** `key` without the cwd: a parked spare serves any cwd. */
  readonly anyCwd: string
  /** Started with `--await-claim`: claimed when taken. */
  readonly parked: boolean
  readonly slot: Slot
  /** Holds the process: the pool's until taken, then closed by the session's Scope. */
  readonly scope: Scope.CloseableScope
}

/** A profile's processes: one permit per process it may hold or be starting, and whether its CLI can park them. */
interface Slot {
  readonly permits: Effect.Semaphore
  readonly parks: Ref.Ref<boolean>
}

/** After a failed warm start: back off, up to one attempt every 30 s. */
const retryPolicy = Schedule.exponential("200 millis").pipe(Schedule.either(Schedule.spaced("30 seconds")))

const closeAll = (warms: ReadonlyArray<Warm>) =>
  Effect.forEach(warms, (warm) => Scope.close(warm.scope, Exit.void), { concurrency: "unbounded", discard: true })

/** The profile key of these options in any cwd. */
const anyCwdKey = (options: Launch.LaunchOptions, initialize: Control.Initialize): string =>
  Launch.profileKey({ ...options, cwd: "" }, initialize)

/** Removes and returns the first warm process that `matches`. */
const takeFirst = (matches: (warm: Warm) => boolean) => (warms: ReadonlyArray<Warm>): readonly [Option.Option<Warm>, ReadonlyArray<Warm>] => {
  const index = warms.findIndex(matches)
  return index < 0 ? [Option.none(), warms] : [Option.some(warms[index]!), warms.filter((_, i) => i !== index)]
}

export const make = (options: Options): Effect.Effect<SessionPool["Type"], never, Scope.Scope | ProcessHost.ProcessHost> =>
  Effect.gen(function*() {
    const host = yield* ProcessHost.ProcessHost
    const fields = CliRequests.initializeFields({
      hooks: yield* Effect.serviceOption(Hooks),
      toolkits: yield* Effect.serviceOption(Toolkits)
    })
    const ready = yield* SubscriptionRef.make<ReadonlyArray<Warm>>([])
    // Finalizers run last-in first: the fibers that start processes stop before the held ones are closed.
    yield* Effect.addFinalizer(() => Effect.flatMap(SubscriptionRef.getAndSet(ready, []), closeAll))
    const starting = yield* FiberSet.make()
    const slots = new Map<string, Slot>()
    /** The cwd-less keys of the profiles whose spares are parked (or would be). */
    const claimable = new Set<string>()

    /** A held process that exits is dropped and replaced; one taken meanwhile is its session's. */
    const dropOnExit = (warm: Warm) =>
      Effect.zipRight(
        warm.launched.child.await,
        Effect.flatMap(
          SubscriptionRef.modify(ready, (warms) => [warms.includes(warm), warms.filter((w) => w !== warm)] as const),
          (held) => held ? Effect.zipRight(Scope.close(warm.scope, Exit.void), warm.slot.permits.release(1)) : Effect.void
        )
      )

    /**
     * Launches and initializes one process, parked when the profile's CLI can
     * park; a CLI that refuses the flag turns parking off for its profile and
     * is launched again without it.
     */
    const launchOne = (profile: SessionOptions, initialize: Control.Initialize, slot: Slot) =>
      Effect.flatMap(Ref.get(slot.parks), (parks) =>
        parks
          ? Launch.warm(Claim.parked(profile), initialize).pipe(
            Effect.map((launched) => [launched, true] as const),
            Effect.catchIf(Claim.isUnsupported, () =>
              Effect.zipRight(
                Effect.zipRight(
                  Ref.set(slot.parks, false),
                  Effect.logInfo("SessionPool: this CLI cannot park spares (no --await-claim); keeping them unparked")
                ),
                Effect.map(Launch.warm(profile, initialize), (launched) => [launched, false] as const)
              ))
          )
          : Effect.map(Launch.warm(profile, initialize), (launched) => [launched, false] as const))

    /** Starts one process and adds it to `ready`; it is in `ready` or stopped, never lost. */
    const warmOne = (key: string, profile: SessionOptions, initialize: Control.Initialize, slot: Slot) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const [launched, parked] = yield* restore(
            Effect.flatMap(
              launchOne(profile, initialize, slot),
              ([launched, parked]) => Effect.map(Warmup.run(launched, options.warmup ?? []), (warmed) => [warmed, parked] as const)
            )
          ).pipe(
            Scope.extend(scope),
            Effect.provideService(ProcessHost.ProcessHost, host),
            Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit))
          )
          const warm: Warm = { key, anyCwd: anyCwdKey(profile, initialize), launched, parked, slot, scope }
          yield* SubscriptionRef.update(ready, (warms) => [...warms, warm])
          // Forked from an uninterruptible region: made interruptible, so the pool's close does not wait on it.
          yield* FiberSet.run(starting, Effect.interruptible(dropOnExit(warm)))
        })
      ).pipe(
        Effect.tapError((error) => Effect.logWarning("SessionPool: a warm start failed; retrying", error)),
        Effect.retry(retryPolicy)
      )

    for (const profile of options.size > 0 ? options.profiles : []) {
      const initialize = Launch.initializeRequest(profile, fields)
      const key = Launch.profileKey(profile, initialize)
      if (slots.has(key)) continue
      const slot: Slot = { permits: yield* Effect.makeSemaphore(options.size), parks: yield* Ref.make(options.claim === true) }
      slots.set(key, slot)
      if (options.claim === true) claimable.add(anyCwdKey(profile, initialize))
      // A permit comes back when a process is taken: that starts its replacement.
      yield* FiberSet.run(
        starting,
        Effect.forever(Effect.zipRight(slot.permits.take(1), FiberSet.run(starting, warmOne(key, profile, initialize, slot))))
      )
    }

    const delay = Duration.decode(options.replenishDelay ?? Duration.zero)
    /** Gives a permit back, which starts a replacement: at once, or after `replenishDelay`, in the background. */
    const replenish = (permits: Effect.Semaphore) =>
      Duration.isZero(delay)
        ? Effect.asVoid(permits.release(1))
        : Effect.asVoid(FiberSet.run(starting, Effect.interruptible(Effect.delay(permits.release(1), delay))))

    /** The first held process that `matches` and still runs; dead ones are dropped (and replaced). */
    const takeLive = (matches: (warm: Warm) => boolean): Effect.Effect<Option.Option<Warm>> =>
      Effect.flatMap(SubscriptionRef.modify(ready, takeFirst(matches)), (found) => {
        if (Option.isNone(found)) return Effect.succeedNone
        const warm = found.value
        return Effect.zipRight(
          replenish(warm.slot.permits),
          Effect.flatMap(warm.launched.child.isRunning, (running) =>
            running ? Effect.succeed(found) : Effect.zipRight(Scope.close(warm.scope, Exit.void), takeLive(matches)))
        )
      })

    /** A parked spare claimed for a session in `cwd`; one refused is stopped, and the session starts cold. */
    const claimed = (warm: Warm, cwd: string): Effect.Effect<Option.Option<Launch.Launched>> =>
      warm.parked
        ? Claim.claim(warm.launched, cwd).pipe(
          Effect.map(Option.some),
          Effect.catchTag("ClaimRefused", (refused) =>
            Effect.as(
              Effect.zipRight(
                Effect.logWarning("SessionPool: a spare refused its claim; starting cold", refused.reason),
                Scope.close(warm.scope, Exit.void)
              ),
              Option.none()
            ))
        )
        : Effect.succeedSome(warm.launched)

    const take: SessionPool["Type"]["take"] = (launch, initialize) =>
      Effect.suspend(() => {
        const key = Launch.profileKey(launch, initialize)
        const anyCwd = anyCwdKey(launch, initialize)
        if (!slots.has(key) && !claimable.has(anyCwd)) return Effect.succeedNone
        const matches = (warm: Warm) => warm.key === key || (warm.parked && warm.anyCwd === anyCwd)
        // Taken and handed to the caller's Scope in one step, so an interruption cannot lose it; the claim may be interrupted.
        return Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(takeLive(matches), (found) =>
            Option.match(found, {
              onNone: () => Effect.succeedNone,
              onSome: (warm) =>
                Effect.zipRight(Effect.addFinalizer((exit) => Scope.close(warm.scope, exit)), restore(claimed(warm, launch.cwd)))
            }))
        )
      }).pipe(Effect.withSpan("SessionPool.take"))

    return SessionPool.of({
      take,
      held: Subscribable.map(ready, (warms) => warms.map((warm) => warm.launched.child.pid))
    })
  })

export const layer = (options: Options): Layer.Layer<SessionPool, never, ProcessHost.ProcessHost> =>
  Layer.scoped(SessionPool, make(options))

/** The size from config: `SKEIN_SESSION_POOL_SIZE` by default, 0 (none held) when unset. */
export const layerConfig = (
  profiles: ReadonlyArray<SessionOptions>,
  size: Config.Config<number> = Config.integer("SKEIN_SESSION_POOL_SIZE").pipe(Config.withDefault(0))
) => Layer.scoped(SessionPool, Effect.flatMap(size, (size) => make({ profiles, size })))
