// The runs an eval asks for: every task × model × attempt, each a CodingRun with a derived
// name, labels saying which cell it is, and the eval as its controlling owner (garbage
// collection deletes the runs with the eval). Pure.
import { createHash } from 'node:crypto';
import { API_VERSION, GROUP, KIND } from '../api/group.ts';
import { EVAL_KIND, type CodingEval, type CodingEvalSpec, type EvalModel, type EvalTask } from '../api/coding-eval.ts';
import { creatorOf } from '../reconcile/approval-answer.ts';

export const EVAL_LABEL = `${GROUP}/eval`;
export const EVAL_UID_LABEL = `${GROUP}/eval-uid`;
export const EVAL_TASK_LABEL = `${GROUP}/eval-task`;
export const EVAL_MODEL_LABEL = `${GROUP}/eval-model`;
export const EVAL_ATTEMPT_LABEL = `${GROUP}/eval-attempt`;

export interface PlannedAttempt {
  task: EvalTask;
  model: EvalModel;
  attempt: number;
}

export const cellKey = (task: string, model: string, attempt: number) => `${task}/${model}/${attempt}`;

/** Every attempt, in task, model, attempt order: the order runs are created and reported in. */
export function plannedAttempts(spec: CodingEvalSpec): PlannedAttempt[] {
  return spec.tasks.flatMap((task) =>
    spec.models.flatMap((model) => Array.from({ length: spec.attempts }, (_, index) => ({ task, model, attempt: index + 1 }))),
  );
}

/**
 * `<eval>-<task>-<model>-<attempt>-<hash>`: readable, and collision-free because the hash is of
 * the eval's uid (no other eval, and nobody before the eval existed, can derive it) and of the
 * cell: task `a-b` with model `c` and task `a` with model `b-c` read the same, and one name for
 * two cells left the second without a run, so the eval never finished. Runs are found by their
 * labels, never by this name.
 */
export function attemptRunName(
  evaluation: Pick<CodingEval, 'metadata'>,
  planned: Pick<PlannedAttempt, 'attempt'> & { task: { name: string }; model: { name: string } },
): string {
  const cell = [evaluation.metadata.uid, planned.task.name, planned.model.name, planned.attempt];
  const hash = createHash('sha256').update(JSON.stringify(cell)).digest('hex').slice(0, 8);
  const suffix = `-${planned.task.name}-${planned.model.name}-${planned.attempt}-${hash}`;
  const prefix = evaluation.metadata.name.slice(0, 253 - suffix.length).replace(/[-.]+$/, '');
  return `${prefix}${suffix}`;
}

const labelValue = (value: string) =>
  value.length <= 63
    ? value
    : `${value.slice(0, 46).replace(/[-.]+$/, '')}-${createHash('sha256').update(value).digest('hex').slice(0, 16)}`;

/** The labels of an attempt's run: `kubectl get crun -l chamvi.dev/eval=NAME,chamvi.dev/eval-model=M`. */
export function attemptLabels(evaluation: Pick<CodingEval, 'metadata'>, planned: PlannedAttempt): Record<string, string> {
  return {
    [EVAL_LABEL]: labelValue(evaluation.metadata.name),
    [EVAL_UID_LABEL]: evaluation.metadata.uid,
    [EVAL_TASK_LABEL]: planned.task.name,
    [EVAL_MODEL_LABEL]: planned.model.name,
    [EVAL_ATTEMPT_LABEL]: String(planned.attempt),
  };
}

/** The CodingRun of one attempt, created like any other run (the operator validates and admits it as such). */
export function attemptRun(evaluation: CodingEval, spec: CodingEvalSpec, planned: PlannedAttempt) {
  const { task, model } = planned;
  const creator = creatorOf(evaluation);
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: {
      name: attemptRunName(evaluation, planned),
      namespace: evaluation.metadata.namespace,
      labels: attemptLabels(evaluation, planned),
      ...(Object.keys(creator).length > 0 ? { annotations: creator } : {}),
      ownerReferences: [
        { apiVersion: API_VERSION, kind: EVAL_KIND, name: evaluation.metadata.name, uid: evaluation.metadata.uid, controller: true },
      ],
    },
    spec: {
      task: task.task,
      repository: task.repository,
      model: model.model,
      ...(model.instructions !== undefined ? { instructions: model.instructions } : {}),
      ...(task.tools ? { tools: task.tools } : {}),
      ...(task.sandbox ? { sandbox: task.sandbox } : {}),
      ...(task.verify ? { verify: task.verify } : {}),
      ...(spec.budget ? { budget: spec.budget } : {}),
    },
  };
}

/** The attempt a run of the eval is, from its labels; undefined for a run that is not one (a label edited by hand). */
export function attemptOfRun(labels: Record<string, string> | undefined): { task: string; model: string; attempt: number } | undefined {
  const task = labels?.[EVAL_TASK_LABEL];
  const model = labels?.[EVAL_MODEL_LABEL];
  const attempt = Number(labels?.[EVAL_ATTEMPT_LABEL]);
  if (!task || !model || !Number.isInteger(attempt) || attempt < 1) return undefined;
  return { task, model, attempt };
}
