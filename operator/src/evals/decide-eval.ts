// The eval's one decision, like reconcile/decide.ts for a run: from the eval, its parsed spec,
// the runs it owns and the attempts just graded, which runs to create (at most `parallelism`
// active at once) and the whole status. Plain data in, plain data out; an injected clock.
//
// A status message may quote the API server's or an admission webhook's words, or a spec's
// keys; kubectl describe, Argo CD and Flux print status and condition messages as they are, so
// every status this file decides ends in oneLineStatus (text/one-line-text.ts), as a run's ends
// in withPhaseConditions. The Events are spelled out and bounded where they are written
// (kube/eval-gateway.ts).
import type { AttemptStatus, CodingEval, CodingEvalSpec, CodingEvalStatus } from '../api/coding-eval.ts';
import type { CodingRun } from '../api/coding-run.ts';
import { isTerminal } from '../api/coding-run-status.ts';
import type { AttemptGrade, GraderVerdict } from './graders.ts';
import { attemptOfRun, cellKey, plannedAttempts, type PlannedAttempt } from './eval-matrix.ts';
import { summarise } from './eval-summary.ts';
import type { RunEvidence } from './run-evidence.ts';
import { oneLineText } from '../text/one-line-text.ts';

export const EVAL_REASONS = {
  InvalidSpec: 'InvalidSpec',
  Running: 'Running',
  /** The API server forbade (403) creating the next run: a ResourceQuota on codingruns, a webhook, RBAC. Tried again. */
  RunsForbidden: 'RunsForbidden',
  Complete: 'Complete',
  /** The API server would not store the eval's status (etcd's size limit): the eval stopped, with a status cut to fit. */
  StatusTooLarge: 'StatusTooLarge',
} as const;

/** The CRD's maxLength of status.message, and metav1.Condition's of a condition's message. */
const STATUS_MESSAGE_CHARACTERS = 4096;
const CONDITION_MESSAGE_CHARACTERS = 32_768;

/**
 * The most of someone else's words (the API server's 403, a refused spec's problem) a message
 * quotes, counted once spelled out: a character spells to up to nine, and the advice after
 * the words must still fit in status.message.
 */
const QUOTED_CHARACTERS = 1024;

/** The status with its message and every condition's message on one line, hidden characters spelled out, bounded after the spelling. */
function oneLineStatus(status: CodingEvalStatus): CodingEvalStatus {
  return {
    ...status,
    ...(status.message !== undefined ? { message: oneLineText(status.message, STATUS_MESSAGE_CHARACTERS) } : {}),
    ...(status.conditions
      ? {
          conditions: status.conditions.map((condition) => ({
            ...condition,
            message: oneLineText(condition.message, CONDITION_MESSAGE_CHARACTERS),
          })),
        }
      : {}),
  };
}

/** While the API server forbids creating runs, the eval tries again this often (a run deleted also wakes it). */
export const RUNS_FORBIDDEN_RETRY_MS = 60_000;

/**
 * While a run under an attempt's name is being deleted, the eval looks again this often: it
 * wakes on the run's own deletion too, but only for runs carrying its labels.
 */
export const DELETING_RUN_RECHECK_MS = 10_000;

export const EVAL_EVENT_REASONS = {
  /** The eval's spec is refused (a CRD installed without its validation): the message says what to change. */
  InvalidSpec: 'InvalidSpec',
  RunsCreated: 'RunsCreated',
  /** The API server refused an attempt's run as invalid (an admission policy, a schema rule): the attempt fails RunRefused. */
  RunRefused: 'RunRefused',
  /** The API server forbade (403) creating a run; the eval waits and tries again. Once per wait, not per try. */
  RunsForbidden: 'RunsForbidden',
  /** A run this eval did not make, or that was changed after, holds an attempt's name: the attempt fails ForeignRun. */
  ForeignRun: 'ForeignRun',
  Complete: 'Complete',
  /** The API server would not store the eval's status (etcd's size limit): the eval stopped. */
  StatusTooLarge: 'StatusTooLarge',
} as const;

export interface EvalEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface EvalDecision {
  create: PlannedAttempt[];
  status: CodingEvalStatus;
  events: EvalEvent[];
}

/**
 * The most of an attempt's failure and of each failed grader's why its record keeps, once
 * spelled out on one line: a why may name a path the model wrote, and a refusal quotes the API
 * server's words, which kubectl describe prints with the rest of the status.
 */
const ATTEMPT_WHY_CHARACTERS = 160;

/** An attempt's record from its finished run and what its graders found. */
export function attemptStatusOf(
  run: CodingRun,
  planned: { task: string; model: string; attempt: number },
  evidence: RunEvidence,
  grade: AttemptGrade,
): AttemptStatus {
  const start = run.status?.startTime ?? run.metadata.creationTimestamp;
  const end = run.status?.completionTime;
  const seconds = start && end ? Math.max(0, (Date.parse(end) - Date.parse(start)) / 1000) : 0;
  const why = (verdict: GraderVerdict) =>
    oneLineText(verdict.why ? `${verdict.grader}: ${verdict.why}` : verdict.grader, ATTEMPT_WHY_CHARACTERS);
  return {
    run: run.metadata.name,
    ...planned,
    phase: evidence.phase,
    ...(evidence.reason ? { reason: evidence.reason } : {}),
    passed: grade.passed,
    ...(grade.failureReason ? { failure: oneLineText(grade.failureReason, ATTEMPT_WHY_CHARACTERS) } : {}),
    ...(grade.failed.length > 0 ? { failedGraders: grade.failed.map(why) } : {}),
    totalTokens: run.status?.usage?.totalTokens ?? 0,
    durationSeconds: Math.round(seconds * 1000) / 1000,
  };
}

/** An attempt whose run the API server refused to create as invalid: failed RunRefused, with the API server's words. */
export function refusedAttempt(run: string, planned: { task: string; model: string; attempt: number }, message: string): AttemptStatus {
  return {
    run,
    ...planned,
    phase: 'Failed',
    reason: 'RunRefused',
    passed: false,
    failure: 'RunRefused',
    failedGraders: [oneLineText(`the API server refused the run: ${message}`, ATTEMPT_WHY_CHARACTERS)],
    totalTokens: 0,
    durationSeconds: 0,
  };
}

/**
 * An attempt whose name a run holds that the eval did not make as it makes it (another author,
 * or a spec changed after): failed ForeignRun, never graded on what that run did.
 */
export function foreignAttempt(run: string, planned: { task: string; model: string; attempt: number }): AttemptStatus {
  return {
    ...refusedAttempt(run, planned, ''),
    reason: 'ForeignRun',
    failure: 'ForeignRun',
    failedGraders: [
      oneLineText(`the run ${run} is not the one this eval made: another author, or a spec changed after`, ATTEMPT_WHY_CHARACTERS),
    ],
  };
}

const byCell = (a: AttemptStatus, b: AttemptStatus, order: Map<string, number>) =>
  (order.get(cellKey(a.task, a.model, a.attempt)) ?? 0) - (order.get(cellKey(b.task, b.model, b.attempt)) ?? 0);

/**
 * What became of a decision's creates, for deciding again after them: the runs made (an
 * 'exists' counts: the run is there), and the API server's words when it forbade the next one.
 * The creates stop at the first 403 (the rest would meet the same quota or policy).
 */
export interface CreatesDone {
  created: readonly PlannedAttempt[];
  forbidden?: string;
}

/**
 * From the eval, its parsed spec, the runs it owns and the attempts just graded: the runs to
 * create and the whole status. Given `done`, the creates have happened: the decision names
 * exactly those runs, plans no more, and says when the API server forbade the rest. `runs` may
 * also hold runs under its attempts' names that are being deleted (deletionTimestamp set): such
 * a run keeps its name until it is gone, so nothing is created for its attempt meanwhile, and
 * it holds none of the eval's parallelism (its pod is going).
 */
export function decideEval(
  evaluation: CodingEval,
  spec: CodingEvalSpec,
  runs: readonly CodingRun[],
  graded: readonly AttemptStatus[],
  now: Date,
  done?: CreatesDone,
): EvalDecision {
  const previous = evaluation.status ?? {};
  const planned = plannedAttempts(spec);
  const order = new Map(planned.map((attempt, index) => [cellKey(attempt.task.name, attempt.model.name, attempt.attempt), index]));
  // Attempts graded before stay as graded: a run deleted later (its TTL, a person) does not change the figures.
  const attempts = new Map<string, AttemptStatus>();
  for (const attempt of [...(previous.attempts ?? []), ...graded]) {
    const key = cellKey(attempt.task, attempt.model, attempt.attempt);
    if (order.has(key) && !attempts.has(key)) attempts.set(key, attempt);
  }
  const withRun = new Set<string>();
  let active = 0;
  for (const run of runs) {
    const cell = attemptOfRun(run.metadata.labels);
    if (!cell) continue;
    const key = cellKey(cell.task, cell.model, cell.attempt);
    if (!order.has(key)) continue;
    withRun.add(key);
    if (!run.metadata.deletionTimestamp && !isTerminal(run.status?.phase) && !attempts.has(key)) active += 1;
  }
  const missing = planned.filter((attempt) => {
    const key = cellKey(attempt.task.name, attempt.model.name, attempt.attempt);
    return !attempts.has(key) && !withRun.has(key);
  });
  const create = done ? [...done.created] : missing.slice(0, Math.max(0, spec.parallelism - active));
  const list = [...attempts.values()].sort((a, b) => byCell(a, b, order));
  const complete = list.length === planned.length;
  const nowText = now.toISOString();
  const passes = list.filter((attempt) => attempt.passed).length;
  const created = new Set([...withRun, ...attempts.keys(), ...create.map((a) => cellKey(a.task.name, a.model.name, a.attempt))]).size;
  const forbiddenBy = complete ? undefined : done?.forbidden;
  const forbidden = forbiddenBy !== undefined;
  const progress = `${list.length} of ${planned.length} attempts graded, ${active + create.length} running`;
  const message = complete
    ? `all ${planned.length} attempts graded: ${passes} passed; kubectl codingrun eval report ${evaluation.metadata.name}`
    : forbiddenBy !== undefined
      ? `${progress}; the API server forbids creating the next run: ${oneLineText(forbiddenBy, QUOTED_CHARACTERS)}. ` +
        "Raise the namespace's quota on codingruns, or fix the policy that refused it, or lower spec.parallelism; the eval " +
        'tries again every minute.'
      : progress;
  const wasComplete = previous.phase === 'Complete';
  const wasForbidden = previous.conditions?.some((condition) => condition.reason === EVAL_REASONS.RunsForbidden) ?? false;
  const completeCondition = {
    type: 'Complete',
    status: complete ? ('True' as const) : ('False' as const),
    reason: complete ? EVAL_REASONS.Complete : forbidden ? EVAL_REASONS.RunsForbidden : EVAL_REASONS.Running,
    message,
    observedGeneration: evaluation.metadata.generation ?? 0,
    lastTransitionTime:
      previous.conditions?.find((condition) => condition.type === 'Complete' && condition.status === (complete ? 'True' : 'False'))
        ?.lastTransitionTime ?? nowText,
  };
  const status: CodingEvalStatus = oneLineStatus({
    phase: complete ? 'Complete' : 'Running',
    message,
    observedGeneration: evaluation.metadata.generation ?? 0,
    conditions: [completeCondition],
    planned: planned.length,
    created,
    graded: list.length,
    passes,
    startTime: previous.startTime ?? nowText,
    ...(complete ? { completionTime: previous.completionTime ?? nowText } : {}),
    results: summarise(spec, list),
    attempts: list,
  });
  const events: EvalEvent[] = [];
  if (create.length > 0)
    events.push({
      type: 'Normal',
      reason: EVAL_EVENT_REASONS.RunsCreated,
      message: `created ${create.length} run(s): ${create.map((a) => cellKey(a.task.name, a.model.name, a.attempt)).join(', ')}`,
    });
  if (forbidden && !wasForbidden) events.push({ type: 'Warning', reason: EVAL_EVENT_REASONS.RunsForbidden, message });
  if (complete && !wasComplete) events.push({ type: 'Normal', reason: EVAL_EVENT_REASONS.Complete, message });
  return { create, status, events };
}

/**
 * Whether the eval has ended, Complete or Failed: nothing more is done for it, and its status,
 * the only record of what it measured (`eval report` reads nothing else), stays as written. Its
 * spec is not checked again either: an operator that refuses what the one before it accepted (a
 * grader path such as test/, refused since grader paths must be written as git prints them)
 * would otherwise turn a Complete eval Failed InvalidSpec.
 */
export function hasEnded(evaluation: Pick<CodingEval, 'status'>): boolean {
  const phase = evaluation.status?.phase;
  return phase === 'Complete' || phase === 'Failed';
}

/**
 * The status of an eval whose spec the operator refuses: Failed, with what to change. An eval
 * refused while running (its spec accepted by the operator before this one) keeps the counts,
 * figures and attempts graded so far: that work is done and paid for, and its status is its
 * only record.
 */
export function refusedEval(evaluation: CodingEval, problem: string, now: Date): EvalDecision {
  const previous = evaluation.status ?? {};
  const graded = previous.attempts?.length ?? 0;
  const kept =
    graded > 0
      ? `The ${graded} attempt(s) graded before are kept (kubectl codingrun eval report ${evaluation.metadata.name}); ` +
        'runs already started finish (delete the eval to stop them). '
      : '';
  // The spec cannot be changed (the CRD holds it to its first value), and an eval that ended is
  // never taken up again (hasEnded): a corrected eval is a new one.
  const message = `the eval is invalid: ${oneLineText(problem, QUOTED_CHARACTERS).replace(/\.$/, '')}. ${kept}Create a new eval with the spec corrected.`;
  const completionTime = previous.completionTime ?? now.toISOString();
  return {
    create: [],
    status: oneLineStatus({
      ...previous,
      phase: 'Failed',
      reason: EVAL_REASONS.InvalidSpec,
      message,
      observedGeneration: evaluation.metadata.generation ?? 0,
      conditions: [
        {
          type: 'Complete',
          status: 'True',
          reason: EVAL_REASONS.InvalidSpec,
          message,
          observedGeneration: evaluation.metadata.generation ?? 0,
          lastTransitionTime: completionTime,
        },
      ],
      completionTime,
    }),
    events: previous.phase === 'Failed' ? [] : [{ type: 'Warning', reason: EVAL_EVENT_REASONS.InvalidSpec, message }],
  };
}

/** What of the status is kept when the whole does not fit: the figures per task × model, or only the counts. */
export type KeptOfStatus = 'results' | 'counts';

/**
 * The status of an eval the API server would not store a status of (etcd's size limit, 1.5 MiB
 * by default, on spec and status together): Failed, reason StatusTooLarge, with the status it
 * could not store cut to what fits (`keep`) and what to change. It creates and grades no more:
 * every write of the whole would be refused again, each try after re-reading finished runs.
 */
export function tooLargeEval(evaluation: CodingEval, status: CodingEvalStatus, keep: KeptOfStatus, now: Date): EvalDecision {
  const left = keep === 'results' ? 'status.attempts is' : 'status.attempts and status.results are';
  const message =
    `the eval's status grew too large for the API server to store (etcd keeps an object under 1.5 MiB by default) with ` +
    `${status.graded ?? 0} of ${status.planned ?? 0} attempts graded: the eval stopped and creates and grades no more runs, ` +
    `and ${left} left out. Runs already started finish; delete the eval to stop them. Create a smaller eval: split the ` +
    `tasks or models over several evals, fewer attempts or graders, shorter grader names, paths and texts.`;
  const nowText = now.toISOString();
  const { attempts: _attempts, results, ...counts } = status;
  return {
    create: [],
    status: oneLineStatus({
      ...counts,
      ...(keep === 'results' && results ? { results } : {}),
      phase: 'Failed',
      reason: EVAL_REASONS.StatusTooLarge,
      message,
      conditions: [
        {
          type: 'Complete',
          status: 'True',
          reason: EVAL_REASONS.StatusTooLarge,
          message,
          observedGeneration: evaluation.metadata.generation ?? 0,
          lastTransitionTime: nowText,
        },
      ],
      completionTime: nowText,
    }),
    events: [{ type: 'Warning', reason: EVAL_EVENT_REASONS.StatusTooLarge, message }],
  };
}
