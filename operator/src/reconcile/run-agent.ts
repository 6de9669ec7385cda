// The port between the controller and the agent workers. The controller decides when a run
// starts and stops; the workers (BullMQ) do the work. Both methods are idempotent: the
// controller may call them again after a crash or a conflict.
import type { CodingRun, ParsedCodingRun } from '../api/index.ts';
import type { ApprovalAnswer } from './approval-answer.ts';
import { NO_DIFF, type KeptDiff } from './kept-diff.ts';
import type { AgentView } from './observed-run.ts';

export type { AgentView };

/** A human's answer to a pending approval: the chamvi.dev/approval annotation's one definition. */
export type { ApprovalAnswer };

export interface RunAgent {
  /**
   * Enqueue the run's first job (prepare), for the sandbox pod named (the run's status names
   * it only once the decision's write lands, after this). A second call for the same run does nothing.
   */
  start(run: ParsedCodingRun, podName: string): Promise<void>;
  /** Continue a run parked on an approval with the answer. Idempotent per approval id. */
  resume(run: CodingRun, answer: ApprovalAnswer): Promise<void>;
  /**
   * Whether resume() queued this answer already (its job is there, in any state): for an
   * approve, proof that the operator (maybe an earlier leader) saw it before the timeout.
   */
  answerQueued(run: CodingRun, answer: ApprovalAnswer): Promise<boolean>;
  /**
   * Remove the run's jobs (in every state) and its state. Safe when there is nothing to
   * remove. Resolves to the number of its jobs still running, which cannot be removed yet:
   * a deletion keeps the run's finalizer until that is 0 and nothing of it is left in Redis.
   */
  stop(run: CodingRun): Promise<number>;
  /** What the agent holds of a started run; undefined when it cannot tell (Redis unreachable). */
  inspect(run: CodingRun): Promise<AgentView | undefined>;
  /**
   * Keep the diff of a run that is ending: take it from the sandbox (fromSandbox: the pod is
   * up) and store it in the run's diff ConfigMap, else read the last snapshot stored there.
   * Never throws: what could not be kept is said in the result (source none, notStored).
   */
  keepDiff(run: ParsedCodingRun, options: { fromSandbox: boolean }): Promise<KeptDiff>;
}

/** Until the workers are wired, runs stop at Running; tests of the controller use this. */
export const idleAgent: RunAgent = {
  async start() {},
  async resume() {},
  async answerQueued() {
    return false;
  },
  async stop() {
    return 0;
  },
  async inspect() {
    return undefined;
  },
  async keepDiff() {
    return NO_DIFF;
  },
};
