// A rate-limited work queue of keys (namespace/name), as in client-go: a key is never
// processed by two workers at once; adding a key that is being processed marks it dirty
// so it runs once more afterwards; failures back off exponentially per key; a key can be
// re-added after a delay (requeueAfter). Timers and the clock are injected for tests.
// A queue made `held` collects keys but processes none until start(): the controller
// starts it only once every informer cache has synced, as controller-runtime does.
import { timerDelay } from '../timer-delay.ts';

export interface WorkQueueOptions {
  concurrency: number;
  /** Collect keys without processing them until start() is called. */
  held?: boolean;
  baseDelayMs?: number;
  maxDelayMs?: number;
  setTimer?: (callback: () => void, ms: number) => { unref?: () => void } | unknown;
  clearTimer?: (timer: unknown) => void;
}

/**
 * `forget`: the key's object is gone; its pending delay and failure count go too (a delay of up
 * to 24.8 days, such as a finished run's TTL, was kept for every run deleted before it).
 */
export type Processor = (key: string) => Promise<{ requeueAfterMs?: number; forget?: boolean } | void>;

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; timer: unknown }>();
  private running = 0;
  private stopped = false;
  private held: boolean;
  private idleWaiters: Array<() => void> = [];
  private readonly setTimer: NonNullable<WorkQueueOptions['setTimer']>;
  private readonly clearTimer: NonNullable<WorkQueueOptions['clearTimer']>;

  constructor(
    private readonly processor: Processor,
    private readonly options: WorkQueueOptions,
    private readonly onError: (key: string, error: unknown) => void = () => {},
  ) {
    this.setTimer = options.setTimer ?? ((callback, ms) => setTimeout(callback, ms).unref());
    this.clearTimer = options.clearTimer ?? ((timer) => clearTimeout(timer as NodeJS.Timeout));
    this.held = options.held ?? false;
  }

  /** Starts processing a held queue (keys added meanwhile included). */
  start(): void {
    this.held = false;
    this.pump();
  }

  get length(): number {
    return this.queue.length;
  }

  add(key: string): void {
    if (this.stopped) return;
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.pump();
  }

  /** Add the key after a delay; an earlier pending delay for the key wins. */
  addAfter(key: string, requested: number): void {
    if (this.stopped) return;
    if (requested <= 0) return this.add(key);
    // A key wanted in 30 days is looked at in 24.8: the reconcile then asks for the rest.
    const ms = timerDelay(requested);
    const at = Date.now() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    if (existing) this.clearTimer(existing.timer);
    const timer = this.setTimer(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { at, timer });
  }

  private forgetDelay(key: string): void {
    const delayed = this.delayed.get(key);
    if (!delayed) return;
    this.clearTimer(delayed.timer);
    this.delayed.delete(key);
  }

  /** Keys waiting for a delay to pass (for tests and metrics). */
  get delayedCount(): number {
    return this.delayed.size;
  }

  private backoff(key: string): number {
    const failures = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, failures);
    const base = this.options.baseDelayMs ?? 200;
    return Math.min(base * 2 ** (failures - 1), this.options.maxDelayMs ?? 60_000);
  }

  private pump(): void {
    while (!this.stopped && !this.held && this.running < this.options.concurrency && this.queue.length > 0) {
      const key = this.queue.shift()!;
      this.queued.delete(key);
      this.processing.add(key);
      this.running++;
      void this.process(key);
    }
  }

  private async process(key: string): Promise<void> {
    let retryAfter: number | undefined;
    try {
      const result = await this.processor(key);
      this.failures.delete(key);
      retryAfter = result?.requeueAfterMs;
      if (result?.forget) this.forgetDelay(key);
    } catch (error) {
      this.onError(key, error);
      retryAfter = this.backoff(key);
    } finally {
      this.processing.delete(key);
      this.running--;
    }
    if (this.dirty.delete(key)) this.add(key);
    else if (retryAfter !== undefined) this.addAfter(key, retryAfter);
    this.pump();
    if (this.running === 0 && this.queue.length === 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  /** Resolves when nothing is queued or processing (delayed keys do not count). */
  async idle(): Promise<void> {
    if (this.running === 0 && this.queue.length === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  stop(): void {
    this.stopped = true;
    for (const { timer } of this.delayed.values()) this.clearTimer(timer);
    this.delayed.clear();
    this.queue.length = 0;
    this.queued.clear();
  }
}
