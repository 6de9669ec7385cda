// Runs one agent job and applies what job-failure.ts decides about an error it throws: fail
// the run, finalize it after its deadline, put the job off (a cancel requested), or rethrow for
// BullMQ to retry. The BullMQ worker (agent-worker.ts) calls this once a job's data is verified;
// tests call it directly.
import { RunFailure } from '../api/run-failure.ts';
import { SandboxError } from '../sandbox/sandbox-error.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { failRun } from './fail-run.ts';
import { fencedByLease } from './lease-fenced-dependencies.ts';
import { runFinalizeJob } from './finalize-job.ts';
import { decideJobFailure } from './job-failure.ts';
import type { AgentJobData, AgentJobName } from './job-ids.ts';
import { forgetRun } from './forget-run.ts';
import { runPrepareJob } from './prepare-job.ts';
import { runPublishJob } from './publish-job.ts';
import { runRefFrom } from './run-ref.ts';
import { runResumeJob } from './resume-job.ts';
import { saveOrLetGo, type LetGo } from './save-if-present.ts';
import { runStepJob } from './step-job.ts';

export interface AgentJob {
  name: AgentJobName;
  data: AgentJobData;
  /** This try, counted from 1. */
  attempt: number;
  /** The tries the queue allows. */
  attempts: number;
  /**
   * Puts the job back in the queue, delayed by `delayMs`, without spending a try, and throws
   * what tells the queue so (agent-worker.ts: BullMQ's moveToDelayed and DelayedError). Absent
   * (a job run outside the worker), the error is thrown on as for a retry.
   */
  putOff?: (delayMs: number) => Promise<never>;
}

function dispatch(deps: AgentDependencies, ref: RunRef, job: AgentJob): Promise<void> {
  switch (job.name) {
    case 'prepare':
      return runPrepareJob(deps, ref, job.data.podName);
    case 'step':
      return runStepJob(deps, ref, job.data.step ?? 0);
    case 'resume':
      return runResumeJob(deps, ref, job.data.approval!);
    case 'finalize':
      return runFinalizeJob(deps, ref);
    case 'publish':
      return runPublishJob(deps, ref);
  }
}

/** The run ended (its stop deleted the state) after the deadline's stop loaded it: no finalize for it. */
const ENDED_AT_DEADLINE: LetGo = {
  why: 'the run ended as its deadline passed: its stop is not saved, no finalize is queued and the run is let go',
};

/**
 * The deadline passed during a step: stop the loop and keep what was done. Saved only over a
 * state still there: the run may have ended since the load (a cancel's ending, a deletion).
 */
async function finalizeAfterDeadline(
  deps: AgentDependencies,
  ref: RunRef,
  stop: { reason: 'DeadlineExceeded'; message: string },
): Promise<void> {
  const state = await deps.states.load(ref);
  // No state: the run's stop deleted it (a cancel's ending, a deletion during the step), so the
  // run is let go here, its sandbox session and script released, as a later load would.
  if (!state) return forgetRun(deps, ref);
  if (state.stage === 'done' || state.stage === 'finalizing') return;
  state.stage = 'finalizing';
  state.stop = stop;
  if (!(await saveOrLetGo(deps, ref, state, ENDED_AT_DEADLINE))) return;
  await deps.queue.finalize(ref, state.verification?.attempts);
}

/**
 * Resolves when the job is done with (the run moved on, or failed); rejects when BullMQ should
 * try again, or with a JobLockLostError when the job's lease ended (job-lease.ts): another
 * worker may run the job now, so this attempt wrote nothing after that, and decides nothing
 * about the run either (no failing it, no finalizing it).
 */
export async function runAgentJob(unfenced: AgentDependencies, job: AgentJob): Promise<void> {
  const ref = runRefFrom(job.data);
  const lease = unfenced.lease;
  const deps = lease ? fencedByLease(unfenced, lease) : unfenced;
  try {
    await dispatch(deps, ref, job);
  } catch (error) {
    if (lease?.aborted) {
      const lost = lease.reason instanceof Error ? lease.reason : new Error(String(lease.reason));
      deps.logger.warn(
        { err: lost.message, cause: error instanceof Error ? error.message : String(error) },
        'job lock lost: the attempt ended without writing',
      );
      throw lost;
    }
    if (SandboxError.isInstance(error)) deps.metrics.execErrors.inc({ kind: error.reason });
    const decision = decideJobFailure(error, job);
    if (decision.action === 'retry' || (decision.action === 'fail' && !RunFailure.isInstance(error))) {
      deps.logger.warn(
        { err: error instanceof Error ? error.message : String(error), lastAttempt: decision.action === 'fail' },
        'agent job failed',
      );
    }
    switch (decision.action) {
      case 'fail':
        if (decision.modelCallError) {
          const run = await deps.getRun(ref.namespace, ref.name).catch(() => undefined);
          deps.metrics.modelCallErrors.inc({
            provider: String((run?.spec.model as { provider?: string } | undefined)?.provider ?? 'unknown'),
            reason: decision.reason,
          });
        }
        // The job's ref is signed, and every job checks it against the live run's uid.
        await failRun(deps, ref, decision.reason, decision.message, job.name !== 'prepare');
        return;
      case 'finalize':
        await finalizeAfterDeadline(deps, ref, decision.stop);
        return;
      case 'retry':
        throw error;
      case 'delay':
        deps.logger.info({ job: job.name, delayMs: decision.delayMs, why: decision.why }, 'the job is put off, its tries unspent');
        if (job.putOff) await job.putOff(decision.delayMs);
        throw error;
    }
  }
}
