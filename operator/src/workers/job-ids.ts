// Job ids built from the run's UID and the step: adding a job whose id exists is a no-op in
// BullMQ, which makes every enqueue idempotent. BullMQ reserves ":" in ids, so none here.
import type { ApprovalAnswer } from '../reconcile/approval-answer.ts';
import type { RunRef } from './run-ref.ts';

export const QUEUE_NAME = 'chamvi-agent';

export type AgentJobName = 'prepare' | 'step' | 'finalize' | 'resume' | 'publish';

/** A job's data: the run it is for (run-ref.ts), and what its kind needs. */
export interface AgentJobData extends RunRef {
  /** step: the number of steps already completed when this job runs. */
  step?: number;
  /** resume: the approval answered. */
  approval?: ApprovalAnswer;
  /**
   * prepare: the sandbox pod the controller gave the run. The job starts before the run's
   * status names it (a warm pool pod's claim and the start are one reconcile). Not covered by
   * the job's MAC (run-state-seal.ts, jobFields): the sandbox execs only into a pod the run
   * controls, whatever name it is given.
   */
  podName?: string;
}

export const jobId = {
  prepare: (uid: string) => `${uid}-prepare`,
  step: (uid: string, completed: number) => `${uid}-step-${completed}`,
  /**
   * round: the verifications (spec.verify) already run; a failure handed back to the model
   * ends in another finalize, which needs an id of its own (the first one's may still be kept).
   */
  finalize: (uid: string, round = 0) => (round > 0 ? `${uid}-finalize-${round}` : `${uid}-finalize`),
  publish: (uid: string) => `${uid}-publish`,
  /**
   * A deny (by a human or at the timeout) has the id of its approval; an approve also names
   * the digest it carries (Security #11.5), so an approval refused for a wrong digest does
   * not block a second approval, with the right one, of the same call.
   */
  resume: (uid: string, approvalId: string, approve?: { sha256?: string | undefined }) =>
    `${uid}-resume-${approvalId.replace(/[^A-Za-z0-9_-]/g, '_')}${approve ? `-approve-${approve.sha256?.slice(0, 16) ?? 'nohash'}` : ''}`,
};
