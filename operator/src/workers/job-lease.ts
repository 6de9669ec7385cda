// A job's lease: this worker's hold on the BullMQ lock of a job it runs, as an AbortSignal the
// job carries (AgentDependencies.lease). BullMQ renews a running job's lock every quarter to half
// of its life (jobLockSeconds) and reports a renewal that failed ('lockRenewalFailed'), but does nothing
// more: the job runs on. And it can only report it once Redis answers again: while Redis is
// unreachable (a Sentinel failover, a restart) the renewal waits, the lock runs out in Redis, and
// another worker's stalled check takes the job while this one still runs it. Both would then
// save the run's state and queue its next job, the later save undoing the earlier.
// So a lease ends (its signal aborts with a JobLockLostError) on whichever comes first: BullMQ
// says the renewal failed, or the lock's life since its last confirmed renewal ('locksRenewed')
// has run out here, less a margin for a write checked just before to reach Redis. The job checks
// it before each write (lease-fenced-dependencies.ts) and stops without writing.
// A failed attempt's lease ends when the worker lets go of it, for the same reason: BullMQ runs
// the job again, and anything the attempt left running (a step's tool call) must not write over
// what the retry saves. A finished attempt's does not: what it set going to land after it (a
// step's trailing record, trailing-record.ts) still goes out.
import { JobAttemptFailedError } from './errors/job-attempt-failed-error.ts';
import { JobLockLostError } from './errors/job-lock-lost-error.ts';

/** How the attempt a lease was held for ended. */
export type AttemptOutcome = 'succeeded' | 'failed';

export interface JobLease {
  /**
   * Aborts, with a JobLockLostError, once the job's lock may be another worker's; with a
   * JobAttemptFailedError once a failed attempt is released.
   */
  readonly signal: AbortSignal;
  /** The attempt is done with: its lease is no longer watched, and ends if the attempt failed. */
  release(outcome: AttemptOutcome): void;
}

/**
 * The share of the lock's life the lease ends before the lock could: a write checked just
 * before the lease ends must reach Redis while the lock still holds (a tenth: 3 s of the default
 * 30 s, hundreds of times a write's round trip). BullMQ renews the lock every quarter to half of
 * its life, so a lease ends only when no renewal was confirmed for nine tenths of it: at the
 * default, a renewal 12 s late. A wider margin ended healthy jobs on a busy event loop (a fifth
 * left 9 s), and each such end repeats the step's paid model call.
 */
const MARGIN = 1 / 10;

class Lease implements JobLease {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly jobId: string,
    private readonly lifeMs: number,
    private readonly now: () => number,
    private readonly onRelease: (lease: Lease) => void,
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The lock was set (taken or renewed) at `at`: the lease lasts its life from then. */
  lockedAt(at: number): void {
    if (this.signal.aborted) return;
    clearTimeout(this.timer);
    const left = at + this.lifeMs - this.now();
    const why = `it was not renewed within ${this.lifeMs} ms: Redis did not answer in time`;
    if (left <= 0) {
      this.end(why);
      return;
    }
    this.timer = setTimeout(() => this.end(why), left);
    this.timer.unref();
  }

  end(why: string): void {
    clearTimeout(this.timer);
    if (!this.signal.aborted) this.controller.abort(new JobLockLostError(this.jobId, why));
  }

  release(outcome: AttemptOutcome): void {
    clearTimeout(this.timer);
    if (outcome === 'failed' && !this.signal.aborted) this.controller.abort(new JobAttemptFailedError(this.jobId));
    this.onRelease(this);
  }
}

/** The leases of the jobs one worker runs; the worker reports its lock events here (agent-worker.ts). */
export class JobLeases {
  private readonly held = new Map<string, Lease>();
  private readonly lifeMs: number;

  constructor(
    lockDurationMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.lifeMs = Math.floor(lockDurationMs * (1 - MARGIN));
  }

  /** The lease of job `jobId`, whose lock this worker took at `lockedAt` (the job's processedOn). */
  hold(jobId: string, lockedAt: number): JobLease {
    // The same job again while an attempt of it still runs here: that attempt's lock ran out
    // (BullMQ hands a job out again only then), so it stops.
    this.held.get(jobId)?.end('this worker took the job again');
    const lease = new Lease(jobId, this.lifeMs, this.now, (released) => {
      if (this.held.get(jobId) === released) this.held.delete(jobId);
    });
    this.held.set(jobId, lease);
    lease.lockedAt(lockedAt);
    return lease;
  }

  /** BullMQ's 'locksRenewed': these jobs' locks were renewed just now. */
  renewed(jobIds: readonly string[]): void {
    const at = this.now();
    for (const id of jobIds) this.held.get(id)?.lockedAt(at);
  }

  /** BullMQ's 'lockRenewalFailed': Redis refused to renew these jobs' locks. */
  renewalFailed(jobIds: readonly string[]): void {
    for (const id of jobIds) this.held.get(id)?.end('Redis would not renew it: it had run out, or another worker holds it now');
  }
}
