// The BullMQ worker that runs agent jobs in every replica: it verifies each job's data and
// hands it to run-agent-job.ts, which runs it and decides (job-failure.ts) what an error
// means for the run; an error it rethrows is retried by BullMQ. Security #11.1: a job whose
// data the operator did not sign is refused before anything in it is used. Each job carries a
// lease on its lock (job-lease.ts): a job whose lock this worker may have lost stops writing.
import { DelayedError, UnrecoverableError, Worker, type ConnectionOptions } from 'bullmq';
import type { AgentDependencies } from './agent-dependencies.ts';
import { QUEUE_NAME, type AgentJobData, type AgentJobName } from './job-ids.ts';
import { jobRetryDelayMs } from './job-retry.ts';
import { runRefFrom } from './run-ref.ts';
import { jobFields, type RunStateSeal, type SignedJobData } from './run-state-seal.ts';
import { runAgentJob } from './run-agent-job.ts';
import { JobLeases, type AttemptOutcome } from './job-lease.ts';
import { JobsInHand } from './worker-stop.ts';

export interface AgentWorkerOptions {
  connection: ConnectionOptions;
  prefix: string;
  concurrency: number;
  /** How long a job's lock lasts without renewal: a dead worker's job is taken over after it. */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  /** Verifies each job's MAC (set by AgentQueue with the same key). */
  seal: RunStateSeal;
  /** Counts the jobs this worker runs, for a stop without Redis (worker-stop.ts). */
  jobsInHand?: JobsInHand;
}

export function startAgentWorker(shared: AgentDependencies, options: AgentWorkerOptions): Worker<AgentJobData, void, AgentJobName> {
  const lockDurationMs = options.lockDurationMs ?? 30_000;
  const leases = new JobLeases(lockDurationMs);
  const jobsInHand = options.jobsInHand ?? new JobsInHand();
  // Set when close() begins (a shutdown: shutdown-sequence.ts). BullMQ's loop then fetches no
  // more, but a fetch already blocked in Redis still takes a job queued at that moment; that job
  // goes back untouched, not counted as an attempt, with the marker that wakes the other
  // replicas' workers, instead of running in a process about to stop.
  let closing = false;
  const worker = new Worker<AgentJobData, void, AgentJobName>(
    QUEUE_NAME,
    async (job, token) => {
      if (closing && token) {
        await job.moveToDelayed(Date.now(), token);
        throw new DelayedError();
      }
      const data: AgentJobData & SignedJobData = job.data;
      if (!options.seal.verifyJob(jobFields(job.name, data), data.mac)) {
        // Not the operator's job (or another key's): its run ref is not trusted either, so no run is touched.
        const why = `job ${job.id} (${job.name}) failed authentication: its data was not written by this operator (was Redis written by something other than the operator, or do the replicas have different stateKeys?)`;
        shared.logger.error({ job: job.name, jobId: job.id }, why);
        throw new UnrecoverableError(why);
      }
      const ref = runRefFrom(data);
      // Every line this job logs, here or in the step it runs, names the run and the step.
      // A step job's data counts the steps completed before it; logs say which step it is (1-based).
      const step = job.name === 'step' ? (job.data.step ?? 0) + 1 : undefined;
      const logger = shared.logger.child({
        namespace: ref.namespace,
        name: ref.name,
        uid: ref.uid,
        job: job.name,
        step,
        attempt: job.attemptsMade + 1,
      });
      const lease = leases.hold(job.id!, job.processedOn ?? Date.now());
      const lost = () =>
        logger.warn({ err: (lease.signal.reason as Error).message }, 'job lock lost: this attempt stops before its next write');
      lease.signal.addEventListener('abort', lost, { once: true });
      let outcome: AttemptOutcome = 'failed';
      try {
        await jobsInHand.run(() =>
          runAgentJob(
            { ...shared, logger, lease: lease.signal },
            {
              name: job.name,
              data,
              attempt: job.attemptsMade + 1,
              attempts: job.opts.attempts ?? 1,
              // Delayed under its own id, its attemptsMade as it was: DelayedError is no failure.
              ...(token
                ? {
                    putOff: async (delayMs: number): Promise<never> => {
                      await job.moveToDelayed(Date.now() + delayMs, token);
                      throw new DelayedError();
                    },
                  }
                : {}),
            },
          ),
        );
        outcome = 'succeeded';
      } finally {
        lease.signal.removeEventListener('abort', lost);
        lease.release(outcome);
      }
    },
    {
      connection: options.connection,
      prefix: options.prefix,
      concurrency: options.concurrency,
      lockDuration: lockDurationMs,
      stalledInterval: options.stalledIntervalMs ?? 15_000,
      maxStalledCount: 3,
      settings: { backoffStrategy: (attemptsMade: number) => jobRetryDelayMs(attemptsMade) },
    },
  );
  // BullMQ only reports a lock it could not renew; the lease makes the job stop (job-lease.ts).
  worker.on('lockRenewalFailed', (jobIds) => leases.renewalFailed(jobIds));
  worker.on('locksRenewed', ({ jobIds }) => leases.renewed(jobIds));
  worker.on('error', (error) => shared.logger.error({ err: error.message }, 'agent worker error'));
  worker.on('closing', () => (closing = true));
  return worker;
}
