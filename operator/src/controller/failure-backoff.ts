// Failures in a row per key (a warm pool), and until when each key waits before it tries again:
// 2 s after the first, doubling, at most 5 min (failedStartBackoffMs). A thing retried at every
// pass that fails at every pass (a pod that never starts, one a webhook changes) would otherwise
// be made and deleted every few seconds. Pure of the clock: every call that needs the time takes `now`.
import { failedStartBackoffMs } from '../reconcile/warm-pool-plan.ts';

export class FailureBackoff {
  private readonly keys = new Map<string, { failures: number; holdUntil: number; at: number }>();

  /** Counts one more failure of `key` at `now`; returns how long from `now` it waits. */
  fail(key: string, now: number): number {
    const state = this.keys.get(key) ?? { failures: 0, holdUntil: 0, at: 0 };
    state.failures++;
    state.holdUntil = now + failedStartBackoffMs(state.failures);
    state.at = now;
    this.keys.set(key, state);
    return state.holdUntil - now;
  }

  /** The cause is gone: `key` waits no more, and its next failure waits 2 s again. */
  clear(key: string): void {
    this.keys.delete(key);
  }

  /** Whether `key` still waits at `now`. */
  holds(key: string, now: number): boolean {
    return now < (this.keys.get(key)?.holdUntil ?? 0);
  }

  /** When `key` last failed, or undefined when it has not since it was cleared. */
  lastFailedAt(key: string): number | undefined {
    return this.keys.get(key)?.at;
  }
}
