// What decide() returns: the actions to apply, the status to write (if it changed), the
// Events to record and when to look again. Plain data, so tests compare it directly.
import type { V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import type { CodingRunStatus } from '../api/index.ts';
import type { WarmPoolConfig } from './warm-pool.ts';
import type { ApprovalAnswer } from './approval-answer.ts';
import type { FinishedRunRecord } from './finished-runs.ts';
import type { IgnoredApproval, SeenApproval } from './observed-run.ts';

export type Action =
  | { type: 'addFinalizer' }
  | { type: 'removeFinalizer' }
  /**
   * Make one of the namespace's sandbox policies (reconcile/sandbox-network-policy.ts) as
   * `policy` says: create it, or replace one the operator made that differs (another egress
   * proxy, an edit). A name held by an object the operator did not make fails the run.
   */
  | { type: 'ensureSandboxPolicy'; policy: V1NetworkPolicy }
  | { type: 'createPod'; pod: V1Pod }
  /** `uid`: the pod as observed; a pod at the name with another uid is not the run's to delete (the API server answers 409). */
  | { type: 'deletePod'; name: string; uid?: string }
  /** Delete the run's own NetworkPolicy, which earlier builds of the operator made per run. */
  | { type: 'deleteNetworkPolicy'; name: string }
  | { type: 'deleteConfigMaps'; names: string[] }
  /** Hand the run to the agent workers (enqueue `prepare`). Idempotent. */
  /** podName: the sandbox pod this decision gives the run (its status says so only once written). */
  | { type: 'startAgent'; podName: string }
  /** Continue a run parked on an approval with a human's (or the timeout's) answer. */
  | { type: 'resumeAgent'; answer: ApprovalAnswer }
  /** Remove the run's queued jobs and Redis state. Idempotent. */
  | { type: 'stopAgent' }
  /**
   * Delete the run (its TTL ran out), first keeping `record` in chamvi-finished-runs
   * (reconcile/finished-runs.ts); none for a run an eval or schedule controls.
   */
  | { type: 'deleteRun'; record?: FinishedRunRecord }
  /**
   * Keep the run's diff before it ends: from the sandbox when `fromSandbox` (the pod is up),
   * else the last snapshot the workers stored; the reconciler decides again with what it got
   * (ObservedRun.keptDiff), and the terminal status carries it. Never fails: at worst, none.
   */
  | { type: 'keepDiff'; fromSandbox: boolean }
  /**
   * Claim a ready pod of the warm pool for the run (reconcile/warm-pool.ts), giving it the
   * run's deadline; the reconciler decides again with what it got (ObservedRun.warmClaim):
   * the pod's name, or none (the pool is empty) and the run gets a fresh pod.
   */
  | { type: 'claimWarmPod'; pool: WarmPoolConfig; activeDeadlineSeconds: number };

export interface RunEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface Decision {
  actions: Action[];
  /** The whole status the run should have; undefined leaves the status alone. */
  status?: CodingRunStatus;
  events: RunEvent[];
  /** Reconcile again after this long even if nothing changes (deadlines, TTL, queue). */
  requeueAfterMs?: number;
  /** The approval answer this decision ignored: the reconciler hands it to the next decision (ObservedRun.ignoredApproval). */
  ignoredApproval?: IgnoredApproval;
  /** The answer to the pending approval this decision passed on, first seen when: handed to the next decision (ObservedRun.seenApproval). */
  seenApproval?: SeenApproval;
  /**
   * An approve this decision denies as first seen past the timeout, with nothing known of it
   * before: the reconciler asks the agent whether its resume job is queued (an earlier
   * leader's, proof it was seen in time) and decides again knowing (ObservedRun.answerQueued).
   */
  lookUpQueuedAnswer?: ApprovalAnswer;
}
