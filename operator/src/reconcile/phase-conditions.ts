// The conditions that tools read, derived from the phase in one place (docs/gitops.md):
//
//   Ready        True once Succeeded; False otherwise, with why (Flux and Argo CD read it)
//   Reconciling  True while the run is not finished; False once it is (kstatus: InProgress;
//                `kubectl wait --for=condition=Reconciling=False` waits for any ending)
//   Stalled      True once Failed or Cancelled: nothing more will happen (kstatus: Failed)
//   Succeeded    True once the run succeeded     } as a Job's Complete and Failed: added only at
//   Failed       True once it failed or was cancelled } the end, so waiting on one is waiting for it
//
// Stalled, Succeeded and Failed are present only when True ("abnormal-true", as kstatus asks).
// Every writer of a phase (decide's StatusBuilder, the workers' transitions) ends with this,
// so the conditions never disagree with status.phase. Pure.
//
// Being the last step of every writer, it is also where status.message and every condition's
// message are made one line, hidden characters spelled out (text/one-line-text.ts): they may
// quote a check's output, a pod's message, git's error, and kubectl describe, Argo CD and Flux
// print them as they are.
import { LIMITS, REASONS, isTerminal, type CodingRunStatus, type ConditionType } from '../api/index.ts';
import { oneLineText } from '../text/one-line-text.ts';
import { setCondition } from './conditions.ts';

/** Condition types an older operator wrote that mean nothing now: dropped when a status is next written. */
const RETIRED_CONDITION_TYPES: ReadonlySet<string> = new Set(['Complete']);

/** metav1.Condition's bound on message (conditions.ts cuts to it too). */
const CONDITION_MESSAGE_CHARACTERS = 32_768;

/** The reason of Ready and Reconciling while a run is not finished: status.reason (Queued, SandboxRefused...), else the phase. */
export function progressReason(status: CodingRunStatus): string {
  return status.reason ?? status.phase ?? 'Pending';
}

/** The status with its Ready, Reconciling, Stalled, Succeeded and Failed conditions set from phase, reason and message. */
export function withPhaseConditions(status: CodingRunStatus, generation: number, now: Date): CodingRunStatus {
  let conditions = (status.conditions ?? []).filter((condition) => !RETIRED_CONDITION_TYPES.has(condition.type));
  const set = (type: ConditionType, value: 'True' | 'False', reason: string, message: string) => {
    conditions = setCondition(conditions, { type, status: value, reason, message }, generation, now);
  };
  const drop = (type: ConditionType) => {
    conditions = conditions.filter((condition) => condition.type !== type);
  };
  if (status.message !== undefined) status.message = oneLineText(status.message, LIMITS.message);
  const message = status.message ?? '';
  if (!isTerminal(status.phase)) {
    const reason = progressReason(status);
    set('Ready', 'False', reason, message || 'The run has not finished.');
    set('Reconciling', 'True', reason, message || 'The run has not finished.');
    drop('Stalled');
    drop('Succeeded');
    drop('Failed');
  } else {
    const reason = status.reason ?? (status.phase === 'Succeeded' ? REASONS.Completed : status.phase!);
    const succeeded = status.phase === 'Succeeded';
    set('Ready', succeeded ? 'True' : 'False', reason, message);
    set('Reconciling', 'False', reason, `The run has finished: ${status.phase}.`);
    if (succeeded) {
      set('Succeeded', 'True', reason, message);
      drop('Stalled');
      drop('Failed');
    } else {
      set('Stalled', 'True', reason, message);
      set('Failed', 'True', reason, message);
      drop('Succeeded');
    }
  }
  status.conditions = conditions.map((condition) => ({
    ...condition,
    message: oneLineText(condition.message, CONDITION_MESSAGE_CHARACTERS),
  }));
  return status;
}

/** A finished run whose spec changed (a budget or TTL edit re-applied by GitOps): the same status, observed at the new generation. */
export function observedAgain(status: CodingRunStatus, generation: number): CodingRunStatus {
  return {
    ...status,
    observedGeneration: generation,
    ...(status.conditions ? { conditions: status.conditions.map((condition) => ({ ...condition, observedGeneration: generation })) } : {}),
  };
}
