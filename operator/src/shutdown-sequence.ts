// The operator's stop on SIGTERM (a rollout, an eviction, a node drain), in the order that
// loses the least work. The workers stop taking jobs first, at once: a job taken during the
// shutdown is one more step the kubelet may cut. The leader's hand-over runs beside them, since
// the standby should lead as soon as the reconciles in flight end, not once the steps do. The
// steps in flight then get as long as the pod's grace period allows: a step cut short is
// taken up again by another replica only once its job lock expires (jobLockSeconds), and
// redone from its model call, so finishing it here saves a model call and that wait.
import type { Logger } from './observability/logger.ts';
import { settlesWithin } from './settles-within.ts';

/** What a stop calls, injected so the order can be tested without Redis or a cluster. */
export interface ShutdownParts {
  /** Stops this replica's workers taking jobs at once; resolves when the jobs they hold have ended. */
  stopTakingJobs(): Promise<void>;
  /** Stops the controllers reconciling; resolves when the reconciles in flight have ended. */
  stopReconciling(): Promise<void>;
  /** Hands the leader lease over (nothing to do without leader election). */
  releaseLease(): Promise<void>;
  /** Closes the rest: Redis, the sandbox sessions, the process launcher, the health server. */
  closeRest(): Promise<void>;
}

export interface ShutdownTimings {
  /** How long the hand-over waits for the reconciles in flight. */
  reconcilesMs: number;
  /** How long the jobs in flight may run on before the process gives up on them. */
  jobsMs: number;
  /** When the process exits whatever is still on its way (process-bootstrap.ts stopOnSignals). */
  exitMs: number;
}

/**
 * The reconciles in flight end before the lease is handed over: a schedule's create (a
 * generated name) or a pool pod's claim still on its way, with the next leader already at
 * work, could make a second run or lose a claimed pod. Bounded, so a stuck API call cannot
 * hold the hand-over.
 */
export const IN_FLIGHT_RECONCILES_GRACE_MS = 5_000;

/** Kept from the jobs' time for closeRest: the step records still on their way land (trailing-record.ts). */
const CLOSE_RESERVE_MS = 3_000;

/** The stop's timings for a process that must be gone `limitMs` after the signal (config shutdownTimeoutSeconds). */
export function shutdownTimings(limitMs: number): ShutdownTimings {
  return {
    reconcilesMs: Math.min(IN_FLIGHT_RECONCILES_GRACE_MS, limitMs),
    // A short limit still gives the jobs half of it.
    jobsMs: Math.max(limitMs - CLOSE_RESERVE_MS, Math.floor(limitMs / 2)),
    exitMs: limitMs,
  };
}

/**
 * Stops the operator: the workers stop taking jobs before anything else happens; the leader
 * hands over beside them; the jobs in flight run on until they end or `timings.jobsMs`. Only
 * when they have ended is the rest closed: closing Redis under a running step would fail it
 * for nothing. Resolves whether the jobs ended in time.
 */
export async function shutDown(parts: ShutdownParts, timings: ShutdownTimings, logger: Logger): Promise<{ jobsEnded: boolean }> {
  const jobs = parts.stopTakingJobs();
  const handOver = (async () => {
    await settlesWithin(parts.stopReconciling(), timings.reconcilesMs);
    await parts.releaseLease();
  })().catch((error: unknown) =>
    logger.warn({ err: String(error) }, 'could not hand the leader lease over; a standby takes it when it expires'),
  );
  const jobsEnded = await settlesWithin(jobs, timings.jobsMs);
  await handOver;
  if (!jobsEnded) {
    logger.warn(
      { waitedSeconds: Math.round(timings.jobsMs / 1000) },
      'jobs still running at the shutdown deadline: another replica redoes their steps once their job locks expire (jobLockSeconds); ' +
        'raise terminationGracePeriodSeconds for steps this long',
    );
    return { jobsEnded };
  }
  await parts.closeRest();
  return { jobsEnded };
}
