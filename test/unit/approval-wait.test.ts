// How approval waits count against a run's deadline (reconcile/approval-wait.ts): the controller
// and the worker both count from these, so they must agree however the waits fall.
import { describe, expect, it } from 'vitest';
import { approvalWaitEnd, approvalWaitShiftMs, countedApprovalWaitMs } from '../../operator/src/reconcile/approval-wait.ts';

const minute = 60_000;

describe('approvalWaitShiftMs', () => {
  it.each([
    ['all under the bound', [10, 20, 5], 60, [10, 20, 5]],
    ['one wait crossing the bound', [40, 30, 5], 60, [40, 20, 0]],
    ['a first wait past the bound', [90, 5], 60, [60, 0]],
  ])('%s: each wait moves the deadline by what it adds to the counted total', (_, waits, bound, shifts) => {
    let before = 0;
    const moved = waits.map((wait) => {
      const shift = approvalWaitShiftMs(before * minute, wait * minute, bound * minute) / minute;
      before += wait;
      return shift;
    });
    expect(moved).toEqual(shifts);
    // Summed, the worker's shifts are the controller's counted total: both end the run at the same time.
    expect(moved.reduce((sum, shift) => sum + shift, 0) * minute).toBe(countedApprovalWaitMs(before * minute, bound * minute));
  });
});

describe('approvalWaitEnd', () => {
  const asked = Date.parse('2026-11-29T12:00:00Z');

  it('ends at approval.timeout while the bound is further off', () => {
    expect(approvalWaitEnd(asked, 30 * minute, 10 * minute, 60 * minute)).toEqual({ at: asked + 30 * minute, by: 'timeout' });
  });

  it('ends when the run’s waits reach the bound, if that comes first', () => {
    expect(approvalWaitEnd(asked, 30 * minute, 45 * minute, 60 * minute)).toEqual({ at: asked + 15 * minute, by: 'allowance' });
  });

  it('ends at once when the waits had passed the bound already', () => {
    expect(approvalWaitEnd(asked, 30 * minute, 90 * minute, 60 * minute)).toEqual({ at: asked, by: 'allowance' });
  });
});
