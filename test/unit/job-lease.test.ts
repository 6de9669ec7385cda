// A job's lease on its BullMQ lock (job-lease.ts): it ends when BullMQ says a renewal failed,
// or when no renewal was confirmed for nine tenths of the lock's life (Redis not answering:
// BullMQ's renewal just waits then), and ends with a JobLockLostError naming the job. A failed
// attempt's lease ends when it is released: what the attempt left running must not write.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { JobAttemptFailedError } from '../../operator/src/workers/errors/job-attempt-failed-error.ts';
import { JobLockLostError } from '../../operator/src/workers/errors/job-lock-lost-error.ts';
import { JobLeases } from '../../operator/src/workers/job-lease.ts';

const LOCK_MS = 30_000;

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('a job lease', () => {
  it('holds for nine tenths of the lock from when the lock was taken, then ends', () => {
    const leases = new JobLeases(LOCK_MS);
    const lease = leases.hold('uid-step-0', Date.now());
    vi.advanceTimersByTime(26_999);
    expect(lease.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(lease.signal.aborted).toBe(true);
    expect(JobLockLostError.isInstance(lease.signal.reason)).toBe(true);
    expect((lease.signal.reason as JobLockLostError).jobId).toBe('uid-step-0');
    expect((lease.signal.reason as Error).message).toMatch(/not renewed within 27000 ms/);
  });

  it('counts from the lock taken, not from when the job began (a job fetched a while ago)', () => {
    const leases = new JobLeases(LOCK_MS);
    const lease = leases.hold('uid-step-0', Date.now() - 20_000);
    vi.advanceTimersByTime(6_999);
    expect(lease.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(lease.signal.aborted).toBe(true);
    // A lock already past its lease ends it at once.
    expect(leases.hold('uid-step-1', Date.now() - 27_000).signal.aborted).toBe(true);
  });

  it('goes on with each renewal BullMQ confirms, for its job only', () => {
    const leases = new JobLeases(LOCK_MS);
    const renewed = leases.hold('uid-a-step-0', Date.now());
    const other = leases.hold('uid-b-step-0', Date.now());
    for (let quarter = 0; quarter < 8; quarter++) {
      vi.advanceTimersByTime(LOCK_MS / 4);
      leases.renewed(['uid-a-step-0']);
    }
    expect(renewed.signal.aborted).toBe(false);
    expect(other.signal.aborted).toBe(true);
    // Renewals stop (Redis does not answer): the lease ends nine tenths of a lock after the last.
    vi.advanceTimersByTime(26_999);
    expect(renewed.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(renewed.signal.aborted).toBe(true);
  });

  it('ends at once when BullMQ could not renew the lock, and a later renewal does not bring it back', () => {
    const leases = new JobLeases(LOCK_MS);
    const lease = leases.hold('uid-step-0', Date.now());
    const other = leases.hold('uid-step-1', Date.now());
    leases.renewalFailed(['uid-step-0']);
    expect(lease.signal.aborted).toBe(true);
    expect((lease.signal.reason as Error).message).toMatch(/job uid-step-0 lost its lock \(Redis would not renew it/);
    expect(other.signal.aborted).toBe(false);
    leases.renewed(['uid-step-0']);
    expect(lease.signal.aborted).toBe(true);
  });

  it('ends the attempt still running when this worker takes the same job again', () => {
    const leases = new JobLeases(LOCK_MS);
    const first = leases.hold('uid-step-0', Date.now());
    const second = leases.hold('uid-step-0', Date.now());
    expect(first.signal.aborted).toBe(true);
    expect(second.signal.aborted).toBe(false);
    // The first attempt's end does not stop watching the second, nor end it.
    first.release('failed');
    expect(second.signal.aborted).toBe(false);
    leases.renewalFailed(['uid-step-0']);
    expect(second.signal.aborted).toBe(true);
  });

  // A succeeded attempt's writes may still be on their way (a step's trailing record): they go out.
  it('once released after the attempt succeeded, is watched no more: neither time nor a failed renewal ends it', () => {
    const leases = new JobLeases(LOCK_MS);
    const lease = leases.hold('uid-step-0', Date.now());
    lease.release('succeeded');
    leases.renewalFailed(['uid-step-0']);
    vi.advanceTimersByTime(10 * LOCK_MS);
    expect(lease.signal.aborted).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  // BullMQ runs a failed job again: a tool call the attempt left running saved its older state
  // over the retry's, and the run stalled. The fence (lease-fenced-dependencies.ts) now stops it.
  it('ends when released after the attempt failed, so nothing the attempt left running writes', () => {
    const leases = new JobLeases(LOCK_MS);
    const lease = leases.hold('uid-step-0', Date.now());
    lease.release('failed');
    expect(lease.signal.aborted).toBe(true);
    expect(JobAttemptFailedError.isInstance(lease.signal.reason)).toBe(true);
    expect((lease.signal.reason as JobAttemptFailedError).jobId).toBe('uid-step-0');
    expect(() => lease.signal.throwIfAborted()).toThrow(/attempt of job uid-step-0 failed .* stops without writing the run's state/);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps the lost lock as the reason when a lease that had ended is released after its attempt failed', () => {
    const leases = new JobLeases(LOCK_MS);
    const lease = leases.hold('uid-step-0', Date.now());
    leases.renewalFailed(['uid-step-0']);
    lease.release('failed');
    expect(JobLockLostError.isInstance(lease.signal.reason)).toBe(true);
  });
});
