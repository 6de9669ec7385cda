// The one place that maps what an agent job threw to the run's fate. Pure: the worker
// (run-agent-job.ts) applies the decision.
//  - a RunFailure ends the run at once with its reason and message (retrying cannot help:
//    a refused key, a bad script, a repository that cannot be cloned, a state not ours);
//  - the run's deadline, hit while a step waited for the model, stops the loop and
//    finalizes it, so the partial diff is kept;
//  - anything else is a transport error (a dropped exec, an API server or Redis restart):
//    retried, and when the tries are spent the run fails SandboxLost (the sandbox would not
//    answer) or AgentFailed;
//  - a job that found a cancel requested is put off, its tries unspent: the controller ends the
//    run meanwhile (and its stop removes the job), or the cancel is withdrawn and it goes on.
import { FAILURE_MESSAGES } from '../api/failure-messages.ts';
import { REASONS, type Reason } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';
import { SandboxError } from '../sandbox/sandbox-error.ts';
import { JobPutOffError } from './errors/job-put-off-error.ts';
import type { AgentJobName } from './job-ids.ts';
import { FORBIDDEN_ATTEMPTS, isForbidden } from './job-retry.ts';

/** Failures of the model call (or of what it needs: its endpoint, its Secret), counted in chamvi_model_call_errors_total. */
const MODEL_CALL_REASONS = new Set<Reason>([
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

/**
 * How long a job that found a cancel requested is put off before it looks again. The controller
 * ends a cancelled run once its diff is taken, up to about 30 s later (longer while its namespace
 * waits its turn), and that ending's stop removes the job: a few looks, one read of the run each.
 */
export const CANCEL_RECHECK_DELAY_MS = 15_000;

export interface FailedJob {
  name: AgentJobName;
  /** This try, counted from 1. */
  attempt: number;
  /** The tries the queue allows the job. */
  attempts: number;
}

export type JobFailureDecision =
  | { action: 'fail'; reason: Reason; message: string; modelCallError: boolean }
  | { action: 'delay'; delayMs: number; why: string }
  | { action: 'finalize'; stop: { reason: typeof REASONS.DeadlineExceeded; message: string } }
  | { action: 'retry' };

/** The run's own deadline (an AbortSignal.timeout around the model call), not a transport timeout. */
function isDeadline(error: unknown): boolean {
  const name = (error as { name?: string } | undefined)?.name;
  return name === 'TimeoutError' || (name === 'AbortError' && /timeout|timed out/i.test(String((error as Error).message)));
}

export function decideJobFailure(error: unknown, job: FailedJob): JobFailureDecision {
  if (RunFailure.isInstance(error)) {
    return { action: 'fail', reason: error.reason, message: error.message, modelCallError: MODEL_CALL_REASONS.has(error.reason) };
  }
  // A job that found a cancel requested (or a spec that no longer parses) waits, its tries
  // unspent, for the controller to end the run or the cancel to be withdrawn. Retried, it spent
  // its tries in about 90 s and was left (done with, its id kept an hour by BullMQ): a cancel
  // withdrawn later lost the step (StateLost) or held an approved call's resume for that hour.
  // Never failed either: AgentFailed would overwrite the ending the controller is about to write.
  if (JobPutOffError.isInstance(error)) return { action: 'delay', delayMs: CANCEL_RECHECK_DELAY_MS, why: error.name };
  // Only model calls run under the deadline signal, so the step was waiting for the model.
  if (job.name === 'step' && isDeadline(error)) {
    return { action: 'finalize', stop: { reason: REASONS.DeadlineExceeded, message: FAILURE_MESSAGES.deadlineWhileWaitingForModel } };
  }
  const forbidden = isForbidden(error);
  const attempts = Math.min(job.attempts, forbidden ? FORBIDDEN_ATTEMPTS : Infinity);
  if (job.attempt < attempts) return { action: 'retry' };
  const detail = error instanceof Error ? error.message : String(error);
  return {
    action: 'fail',
    reason: SandboxError.isInstance(error) ? REASONS.SandboxLost : REASONS.AgentFailed,
    message: FAILURE_MESSAGES.jobFailed(job.name, job.attempt, detail, forbidden),
    modelCallError: false,
  };
}
