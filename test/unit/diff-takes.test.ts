// The diffs the controller takes from runs it ends, beside its reconciles (controller/diff-takes.ts):
// a reconcile starts a take and ends; the take's end wakes the run, whose next reconcile gets the
// diff once. A take waits on the sandbox, which the model controls (a clean filter that sleeps):
// taken inside the reconciles, four slow ones held every reconcile slot. The takes that wait for a
// place are served a namespace at a time, in turn; an outcome no poll claims soon is dropped.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DIFF_OUTCOME_KEPT_MS, DiffTakes } from '../../operator/src/controller/diff-takes.ts';
import { NO_DIFF, type KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';

/** A take that ends when the test says. */
function pendingTake() {
  let finish!: (kept: KeptDiff) => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<KeptDiff>((resolve, reject) => ((finish = resolve), (fail = reject)));
  let started = 0;
  return {
    take: () => (started++, promise),
    finish: (kept: KeptDiff) => finish(kept),
    fail: (error: Error) => fail(error),
    started: () => started,
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));
const kept = (diff: string): KeptDiff => ({ ...NO_DIFF, source: 'final', diff });

describe('DiffTakes', () => {
  it('starts a take at the first poll, wakes the run when it ends, and gives its diff once', async () => {
    const woken: string[] = [];
    const takes = new DiffTakes((key) => woken.push(key));
    const slow = pendingTake();
    expect(takes.poll('ns/r', 'uid-1', slow.take)).toBeUndefined();
    expect(takes.poll('ns/r', 'uid-1', slow.take)).toBeUndefined();
    expect(slow.started()).toBe(1);
    slow.finish(kept('diff --git a/x b/x'));
    await settle();
    expect(woken).toEqual(['ns/r']);
    expect(takes.poll('ns/r', 'uid-1', slow.take)).toEqual({ kept: kept('diff --git a/x b/x') });
    expect(takes.size).toBe(0);
  });

  it('gives a failed take as failed, and a new run of the name starts its own take', async () => {
    const takes = new DiffTakes(() => undefined);
    const first = pendingTake();
    takes.poll('ns/r', 'uid-1', first.take);
    first.fail(new Error('sandbox gone'));
    await settle();
    const second = pendingTake();
    // Another run under the name (uid-2): not the first run's outcome.
    expect(takes.poll('ns/r', 'uid-2', second.take)).toBeUndefined();
    expect(second.started()).toBe(1);
    const third = pendingTake();
    takes.poll('ns/q', 'uid-3', third.take);
    third.fail(new Error('sandbox gone'));
    await settle();
    expect(takes.poll('ns/q', 'uid-3', third.take)).toEqual({ failed: new Error('sandbox gone') });
  });

  it('runs at most two takes at once; the others wait for one to end', async () => {
    const takes = new DiffTakes(() => undefined, { atOnce: 2 });
    const slow = [pendingTake(), pendingTake(), pendingTake()];
    slow.forEach((each, i) => takes.poll(`ns/r${i}`, `uid-${i}`, each.take));
    await settle();
    expect(slow.map((each) => each.started())).toEqual([1, 1, 0]);
    slow[0]!.finish(NO_DIFF);
    await settle();
    expect(slow[2]!.started()).toBe(1);
  });

  it('keeps nothing of a run forgotten (deleted) while its take ran', async () => {
    const woken: string[] = [];
    const takes = new DiffTakes((key) => woken.push(key));
    const slow = pendingTake();
    takes.poll('ns/r', 'uid-1', slow.take);
    takes.forget('ns/r');
    slow.finish(NO_DIFF);
    await settle();
    expect(woken).toEqual([]);
    expect(takes.size).toBe(0);
  });

  it("serves the namespaces in turn: one namespace's slow takes do not hold another's up", async () => {
    const takes = new DiffTakes(() => undefined, { atOnce: 2 });
    // Twenty takes whose sandboxes hold `git diff` (a clean filter), then another namespace's cancel.
    const slow = Array.from({ length: 20 }, () => pendingTake());
    slow.forEach((each, i) => takes.poll(`team-a/run-${i}`, `uid-a-${i}`, each.take));
    const other = pendingTake();
    takes.poll('team-b/cancelled', 'uid-b', other.take);
    await settle();
    expect(other.started()).toBe(0);
    // The first place that frees, one take's time later, is team-b's.
    slow[0]!.finish(NO_DIFF);
    await settle();
    expect(other.started()).toBe(1);
    expect(slow[2]!.started()).toBe(0);
    // Then team-a's, in the order they were polled.
    slow[1]!.finish(NO_DIFF);
    await settle();
    expect(slow.map((each) => each.started()).slice(0, 4)).toEqual([1, 1, 1, 0]);
  });

  describe('an outcome nobody claims', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('is dropped after DIFF_OUTCOME_KEPT_MS, and a later poll takes the diff afresh', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
      const takes = new DiffTakes(() => undefined);
      // A cancel's take; the cancel is withdrawn before it ends, and no reconcile polls again.
      const early = pendingTake();
      takes.poll('ns/r', 'uid-1', early.take);
      early.finish(kept('diff at step 3'));
      await settle();
      expect(takes.size).toBe(1);
      vi.advanceTimersByTime(DIFF_OUTCOME_KEPT_MS + 1);
      expect(takes.size).toBe(0);
      // The run's deadline, later: its ending takes the sandbox as it is now.
      const late = pendingTake();
      expect(takes.poll('ns/r', 'uid-1', late.take)).toBeUndefined();
      expect(late.started()).toBe(1);
      late.finish(kept('diff at step 50'));
      await settle();
      expect(takes.poll('ns/r', 'uid-1', late.take)).toEqual({ kept: kept('diff at step 50') });
    });

    it('is dropped by a reconcile that no longer asks for the diff; a take under way is left to end', async () => {
      const takes = new DiffTakes(() => undefined);
      const early = pendingTake();
      takes.poll('ns/r', 'uid-1', early.take);
      // The cancel is withdrawn while the take runs: the reconcile that sees it keeps the take going.
      takes.dropUnclaimed('ns/r');
      expect(takes.size).toBe(1);
      early.finish(kept('diff at step 3'));
      await settle();
      // Its end wakes the run, whose decision asks for no diff: the outcome goes.
      takes.dropUnclaimed('ns/r');
      expect(takes.size).toBe(0);
      const late = pendingTake();
      expect(takes.poll('ns/r', 'uid-1', late.take)).toBeUndefined();
      expect(late.started()).toBe(1);
    });

    it('is still given to the poll its end woke, within DIFF_OUTCOME_KEPT_MS', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
      const takes = new DiffTakes(() => undefined);
      const slow = pendingTake();
      takes.poll('ns/r', 'uid-1', slow.take);
      slow.finish(kept('diff --git a/x b/x'));
      await settle();
      vi.advanceTimersByTime(DIFF_OUTCOME_KEPT_MS - 1);
      expect(takes.poll('ns/r', 'uid-1', slow.take)).toEqual({ kept: kept('diff --git a/x b/x') });
      expect(slow.started()).toBe(1);
      expect(takes.size).toBe(0);
    });
  });
});
