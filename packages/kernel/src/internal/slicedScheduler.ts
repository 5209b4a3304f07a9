import * as Scheduler from "effect/Scheduler"

/**
 * Runs ready tasks in the order Effect's own schedulers do (by priority
 * bucket, then first in, first out), checking the clock after each task, and
 * yields with `setImmediate` once a slice is spent. `setImmediate` runs after
 * the loop's I/O poll, so pipes and timers get their turn before the next
 * slice; the tasks left over run first in it.
 */
export class SlicedScheduler implements Scheduler.Scheduler {
  private readonly incoming = new Scheduler.PriorityBuckets()
  /** Tasks taken from `incoming` that a spent slice left unrun, oldest first. */
  private backlog: Array<Scheduler.Task> = []
  private scheduled = false

  constructor(
    readonly sliceMillis: number,
    private readonly now: () => number,
    private readonly yieldToLoop: (drain: () => void) => void
  ) {}

  readonly shouldYield = Scheduler.defaultShouldYield

  scheduleTask(task: Scheduler.Task, priority: number): void {
    this.incoming.scheduleTask(task, priority)
    if (!this.scheduled) {
      this.scheduled = true
      this.yieldToLoop(this.drain)
    }
  }

  private readonly drain = (): void => {
    const deadline = this.now() + this.sliceMillis
    let tasks = this.backlog
    this.backlog = []
    for (;;) {
      for (let i = 0; i < tasks.length; i++) {
        tasks[i]!()
        if (i + 1 < tasks.length && this.now() >= deadline) {
          this.backlog = tasks.slice(i + 1)
          return this.yieldToLoop(this.drain)
        }
      }
      tasks = this.takeIncoming()
      if (tasks.length === 0) break
      if (this.now() >= deadline) {
        this.backlog = tasks
        return this.yieldToLoop(this.drain)
      }
    }
    this.scheduled = false
  }

  private takeIncoming(): Array<Scheduler.Task> {
    const buckets = this.incoming.buckets
    if (buckets.length === 0) return []
    this.incoming.buckets = []
    return buckets.length === 1 ? buckets[0]![1] : buckets.flatMap(([, tasks]) => tasks)
  }
}
