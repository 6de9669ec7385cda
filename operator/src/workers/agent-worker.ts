// The BullMQ worker that runs agent jobs in every replica. It maps what a job throws to
// the run's fate: a model error with a reason ends the run with it; the deadline turns
// into a finalize that keeps the partial diff; anything else is retried by BullMQ, and
// ends the run as AgentFailed when the retries are spent. Security #11.1: a job whose data
// the operator did not sign is refused before anything in it is used, and a run whose state
// does not verify fails StateLost instead of acting on it.
import { UnrecoverableError, Worker, type ConnectionOptions, type Job } from 'bullmq';
import { REASONS } from '../api/index.ts';
import { SandboxError } from '../sandbox/sandbox-error.ts';
import { failRun, type AgentDependencies } from './agent-dependencies.ts';
import { runFinalizeJob } from './finalize-job.ts';
import { FORBIDDEN_ATTEMPTS, isForbidden } from './job-retry.ts';
import { QUEUE_NAME, type AgentJobData, type AgentJobName } from './job-ids.ts';
import { jobRetryDelayMs } from './job-retry.ts';
import { runPrepareJob } from './prepare-job.ts';
import { runRefFrom, type RunRef } from './run-ref.ts';
import { RunStateInvalidError } from './run-state-invalid-error.ts';
import type { RunStateSeal, SignedJobData } from './run-state-seal.ts';
import { runResumeJob } from './resume-job.ts';
import { runStepJob } from './step-job.ts';

export interface AgentWorkerOptions {
  connection: ConnectionOptions;
  prefix: string;
  concurrency: number;
  /** How long a job's lock lasts without renewal: a dead worker's job is taken over after it. */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  /** Verifies each job's MAC (set by AgentQueue with the same key). */
  seal: RunStateSeal;
}

const MODEL_REASONS = new Set<string>([
  REASONS.ModelAuthFailed,
  REASONS.ModelUnavailable,
  REASONS.ModelRequestRejected,
  REASONS.ModelResponseInvalid,
  REASONS.ModelConfigurationInvalid,
  REASONS.ModelScriptInvalid,
  // Security #11.3: re-checked at the point of use; retrying cannot change the answer.
  REASONS.ModelEndpointNotAllowed,
  REASONS.SecretNotAllowed,
]);

function reasonOf(error: unknown): string | undefined {
  const reason = (error as { reason?: unknown } | undefined)?.reason;
  return typeof reason === 'string' && MODEL_REASONS.has(reason) ? reason : undefined;
}

function isDeadline(error: unknown): boolean {
  const name = (error as { name?: string } | undefined)?.name;
  return name === 'TimeoutError' || (name === 'AbortError' && /timeout|timed out/i.test(String((error as Error).message)));
}

async function process(deps: AgentDependencies, job: Job<AgentJobData, void, AgentJobName>): Promise<void> {
  const ref = runRefFrom(job.data);
  switch (job.name) {
    case 'prepare':
      return runPrepareJob(deps, ref);
    case 'step':
      return runStepJob(deps, ref, job.data.step ?? 0);
    case 'resume':
      return runResumeJob(deps, ref, job.data.approval!);
    case 'finalize':
      return runFinalizeJob(deps, ref);
  }
}

/** The deadline passed during a step: stop the loop and keep what was done. */
async function finalizeAfterDeadline(deps: AgentDependencies, ref: RunRef): Promise<void> {
  const state = await deps.states.load(ref);
  if (!state || state.stage === 'done' || state.stage === 'finalizing') return;
  state.stage = 'finalizing';
  // Only model calls run under the deadline signal, so the step was waiting for the model.
  state.stop = {
    reason: 'DeadlineExceeded',
    message: 'The run reached spec.budget.timeout while waiting for the model to answer; the partial diff is kept. Raise the timeout or narrow the task, and check the model endpoint if it hangs.',
  };
  await deps.states.save(state);
  await deps.queue.finalize(ref);
}

export function startAgentWorker(shared: AgentDependencies, options: AgentWorkerOptions): Worker<AgentJobData, void, AgentJobName> {
  const worker = new Worker<AgentJobData, void, AgentJobName>(
    QUEUE_NAME,
    async (job) => {
      const data: AgentJobData & SignedJobData = job.data;
      if (!options.seal.verifyJob({ name: job.name, uid: data.uid, namespace: data.namespace, runName: data.name, step: data.step, approval: data.approval }, data.mac)) {
        // Not the operator's job (or another key's): its run ref is not trusted either, so no run is touched.
        const why = `job ${job.id} (${job.name}) failed authentication: its data was not written by this operator (was Redis written by something other than the operator, or do the replicas have different stateKeys?)`;
        shared.logger.error({ job: job.name, jobId: job.id }, why);
        throw new UnrecoverableError(why);
      }
      const ref = runRefFrom(data);
      // Every line this job logs, here or in the step it runs, names the run and the step.
      // A step job's data counts the steps completed before it; logs say which step it is (1-based).
      const step = job.name === 'step' ? (job.data.step ?? 0) + 1 : undefined;
      const deps = { ...shared, logger: shared.logger.child({ namespace: ref.namespace, name: ref.name, uid: ref.uid, job: job.name, step, attempt: job.attemptsMade + 1 }) };
      try {
        await process(deps, job);
      } catch (error) {
        if (RunStateInvalidError.isInstance(error)) {
          // The job's ref is signed, and every job checks it against the live run's uid.
          await failRun(deps, ref, REASONS.StateLost, error.message);
          return;
        }
        const reason = reasonOf(error);
        if (SandboxError.isInstance(error)) deps.metrics.execErrors.inc({ kind: error.reason });
        if (reason) {
          const run = await deps.getRun(ref.namespace, ref.name).catch(() => undefined);
          deps.metrics.modelCallErrors.inc({ provider: String((run?.spec.model as { provider?: string } | undefined)?.provider ?? 'unknown'), reason });
          await failRun(deps, ref, reason, (error as Error).message);
          return;
        }
        if (job.name === 'step' && isDeadline(error)) {
          await finalizeAfterDeadline(deps, ref);
          return;
        }
        const forbidden = isForbidden(error);
        const attempts = Math.min(job.opts.attempts ?? 1, forbidden ? FORBIDDEN_ATTEMPTS : Infinity);
        const lastAttempt = job.attemptsMade + 1 >= attempts;
        deps.logger.warn({ err: error instanceof Error ? error.message : String(error), lastAttempt }, 'agent job failed');
        if (lastAttempt) {
          const why = SandboxError.isInstance(error) ? REASONS.SandboxLost : REASONS.AgentFailed;
          const hint = forbidden ? " The operator's ServiceAccount is forbidden to do this: give it the chart's RBAC (see docs/operations.md)." : '';
          await failRun(deps, ref, why, `The ${job.name} job failed ${job.attemptsMade + 1} times: ${error instanceof Error ? error.message : String(error)}${hint}`);
          return;
        }
        throw error;
      }
    },
    {
      connection: options.connection,
      prefix: options.prefix,
      concurrency: options.concurrency,
      lockDuration: options.lockDurationMs ?? 30_000,
      stalledInterval: options.stalledIntervalMs ?? 15_000,
      maxStalledCount: 3,
      settings: { backoffStrategy: (attemptsMade: number) => jobRetryDelayMs(attemptsMade) },
    },
  );
  worker.on('error', (error) => shared.logger.error({ err: error.message }, 'agent worker error'));
  return worker;
}
