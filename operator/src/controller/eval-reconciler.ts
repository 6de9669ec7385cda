// The thin shell around decideEval(): read one eval's world (the eval, the runs it controls,
// what grading needs of each newly finished run), ask evals/ what to do, do it, and write the
// status in one place. Level-triggered like the run reconciler: the key is only a name.
import { isDeepStrictEqual } from 'node:util';
import { isTerminal, type CodingRun } from '../api/index.ts';
import { EVAL_KIND, type AttemptStatus, type CodingEval, type CodingEvalSpec } from '../api/coding-eval.ts';
import { CREATOR_ANNOTATION } from '../reconcile/approval-answer.ts';
import { decodeDiff, isCutDiff, isKeptDiff } from '../reconcile/diff-config-map.ts';
import { isOwnedByRun } from '../reconcile/ownership.ts';
import { TranscriptReader } from '../record/transcript-chunks.ts';
import {
  EVAL_EVENT_REASONS,
  RUNS_FORBIDDEN_RETRY_MS,
  attemptStatusOf,
  decideEval,
  foreignAttempt,
  refusedAttempt,
  refusedEval,
  type CreatesDone,
  type EvalDecision,
} from '../evals/decide-eval.ts';
import { attemptOfRun, attemptRun, cellKey, type PlannedAttempt } from '../evals/eval-matrix.ts';
import { gradeAttempt } from '../evals/graders.ts';
import { parseEvalSpec } from '../evals/parse-eval.ts';
import { runEvidence, gradedParts } from '../evals/run-evidence.ts';
import type { EvalGateway } from '../kube/eval-gateway.ts';
import type { ObjectCache } from './run-reconciler.ts';

export interface EvalReconcilerLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface EvalReconcilerDeps {
  evals: ObjectCache<CodingEval>;
  /** Runs carrying the eval labels (controller/eval-controller.ts). */
  runs: ObjectCache<CodingRun>;
  gateway: EvalGateway;
  identity: string;
  logger: EvalReconcilerLogger;
  now?: () => Date;
}

/**
 * Whether the run is the one the eval makes for the attempt its labels name: under the name the
 * eval gives that attempt, controlled by the eval, with the labels, creator and spec the eval
 * writes. Whoever creates runs in the namespace can copy the labels and an owner reference
 * naming the eval (its uid is on its runs' labels), and can even take the attempt's name before
 * the eval does (the uid is all it is derived from); whoever may patch runs can raise an
 * attempt's budget. A run made or changed so would be graded for an attempt, on a task, model or
 * budget its author chose. The CRD applies no defaults, so the run's stored spec is the eval's
 * as written.
 */
export function isAttemptRun(run: CodingRun, evaluation: CodingEval, spec: CodingEvalSpec): boolean {
  const cell = attemptOfRun(run.metadata.labels);
  const task = spec.tasks.find((candidate) => candidate.name === cell?.task);
  const model = spec.models.find((candidate) => candidate.name === cell?.model);
  if (!cell || !task || !model || cell.attempt > spec.attempts) return false;
  const expected = attemptRun(evaluation, spec, { task, model, attempt: cell.attempt });
  const annotation = (of: { annotations?: Record<string, string> }) => of.annotations?.[CREATOR_ANNOTATION];
  return (
    run.metadata.namespace === evaluation.metadata.namespace &&
    run.metadata.name === expected.metadata.name &&
    Object.entries(expected.metadata.labels).every(([key, value]) => run.metadata.labels?.[key] === value) &&
    annotation(run.metadata) === annotation(expected.metadata) &&
    (run.metadata as { ownerReferences?: Array<{ kind?: string; uid?: string; controller?: boolean }> }).ownerReferences?.some(
      (owner) => owner.controller === true && owner.kind === EVAL_KIND && owner.uid === evaluation.metadata.uid,
    ) === true &&
    isDeepStrictEqual(run.spec, JSON.parse(JSON.stringify(expected.spec))) &&
    // Never changed: the operator never writes a run's spec, and the API server counts every
    // change in generation. A spec compared only as it is now passed a budget raised for the
    // run's steps and put back before it ended.
    (run.metadata.generation ?? 1) === 1
  );
}

/** The eval's runs: those it made, as it made them (isAttemptRun). */
export function runsOfEval(runs: readonly CodingRun[], evaluation: CodingEval, spec: CodingEvalSpec): CodingRun[] {
  return runs.filter((run) => isAttemptRun(run, evaluation, spec));
}

export class EvalReconciler {
  private readonly now: () => Date;

  constructor(private readonly deps: EvalReconcilerDeps) {
    this.now = deps.now ?? (() => new Date());
  }

  async reconcile(key: string): Promise<{ requeueAfterMs: number } | void> {
    const [namespace, name] = key.split('/') as [string, string];
    const evaluation = this.deps.evals.get(namespace, name);
    if (!evaluation || evaluation.metadata.deletionTimestamp) return;
    const parsed = parseEvalSpec(evaluation);
    if (!parsed.ok) return this.apply(evaluation, refusedEval(evaluation, parsed.problem, this.now()));
    const runs = runsOfEval(this.deps.runs.list(), evaluation, parsed.spec);
    const graded = new Set((evaluation.status?.attempts ?? []).map((attempt) => cellKey(attempt.task, attempt.model, attempt.attempt)));
    const fresh: AttemptStatus[] = [];
    for (const run of runs) {
      const cell = attemptOfRun(run.metadata.labels);
      if (!cell || !isTerminal(run.status?.phase) || graded.has(cellKey(cell.task, cell.model, cell.attempt))) continue;
      const task = parsed.spec.tasks.find((candidate) => candidate.name === cell.task);
      if (!task) continue;
      const evidence = await this.evidenceOf(run);
      fresh.push(attemptStatusOf(run, cell, evidence, gradeAttempt(task.graders, evidence)));
    }
    const decision = decideEval(evaluation, parsed.spec, runs, fresh, this.now());
    if (decision.create.length === 0) return this.apply(evaluation, decision);
    // A run the API server refuses as invalid (an admission policy, a schema rule) would be
    // refused again on every retry: its attempt is graded as failed RunRefused, with the reason.
    // A 403 (a ResourceQuota on codingruns below parallelism, a webhook) may pass later: the
    // creates stop there, the status says why, and the eval tries again.
    const refused: AttemptStatus[] = [];
    const foreign: AttemptStatus[] = [];
    const created: PlannedAttempt[] = [];
    let forbidden: string | undefined;
    for (const planned of decision.create) {
      const manifest = attemptRun(evaluation, parsed.spec, planned);
      const cell = { task: planned.task.name, model: planned.model.name, attempt: planned.attempt };
      const outcome = await this.deps.gateway.createRun(manifest);
      if (outcome === 'created') created.push(planned);
      else if (outcome === 'exists') {
        // Ours when the cache had not seen it yet (a retry after a crash), or gone again (the
        // next reconcile makes it); else someone took the name first or changed the run.
        const holder = await this.deps.gateway.getRun(manifest.metadata.namespace, manifest.metadata.name);
        if (holder === undefined || isAttemptRun(holder, evaluation, parsed.spec)) created.push(planned);
        else foreign.push(foreignAttempt(manifest.metadata.name, cell));
      } else if ('forbidden' in outcome) {
        forbidden = outcome.forbidden;
        break;
      } else refused.push(refusedAttempt(manifest.metadata.name, cell, outcome.refused));
    }
    this.deps.logger.info(
      { eval: evaluation.metadata.name, runs: created.length, refused: refused.length, forbidden: forbidden !== undefined },
      'eval runs created',
    );
    const done: CreatesDone = forbidden === undefined ? { created } : { created, forbidden };
    const after = decideEval(evaluation, parsed.spec, runs, [...fresh, ...refused, ...foreign], this.now(), done);
    const events = [...after.events];
    if (refused.length > 0)
      events.push({
        type: 'Warning',
        reason: EVAL_EVENT_REASONS.RunRefused,
        message: `the API server refused ${refused.length} run(s): ${refused[0]!.failedGraders![0]!}`,
      });
    if (foreign.length > 0)
      events.push({
        type: 'Warning',
        reason: EVAL_EVENT_REASONS.ForeignRun,
        message: `${foreign.length} attempt(s) failed ForeignRun: ${foreign[0]!.failedGraders![0]!}`,
      });
    await this.apply(evaluation, { ...after, events });
    if (forbidden !== undefined) return { requeueAfterMs: RUNS_FORBIDDEN_RETRY_MS };
  }

  /** The run's transcript, read with the transcript's own reader, and its whole diff when status holds a cut. */
  private async evidenceOf(run: CodingRun) {
    const { namespace, uid } = run.metadata;
    // Only what grading reads is kept of each entry: a transcript's texts are most of it.
    const reader = new TranscriptReader(run, gradedParts);
    await this.deps.gateway.listTranscript(namespace, uid, (page) => (reader.add(page).full ? 'enough' : 'more'));
    const transcript = reader.result();
    const result = run.status?.result;
    let fullDiff: string | undefined;
    if (result?.diffTruncated && result.diffConfigMap) {
      const configMap = await this.deps.gateway.getDiffConfigMap(namespace, result.diffConfigMap);
      // Only the run's own ConfigMap counts, holding the diff the run kept: anyone who creates
      // ConfigMaps could put one at that name, and anyone who edits them could change it.
      const diff = configMap && isOwnedByRun(configMap, run) ? decodeDiff(configMap) : undefined;
      // A cut of a change over 1 MiB is not the change: the file graders would pass on what it left out.
      if (diff !== undefined && isKeptDiff(diff, result) && !isCutDiff(diff, result)) fullDiff = diff;
    }
    return runEvidence(run, transcript, fullDiff);
  }

  private async apply(evaluation: CodingEval, decision: EvalDecision) {
    if (!isDeepStrictEqual(decision.status, evaluation.status ?? {})) {
      await this.deps.gateway.replaceEvalStatus(evaluation, decision.status);
      this.deps.logger.info(
        {
          eval: evaluation.metadata.name,
          namespace: evaluation.metadata.namespace,
          phase: decision.status.phase,
          graded: decision.status.graded,
        },
        'eval status written',
      );
    }
    for (const event of decision.events) {
      await this.deps.gateway.recordEvent(evaluation, event, this.deps.identity).catch((error: unknown) => {
        this.deps.logger.warn({ eval: evaluation.metadata.name, reason: event.reason, err: String(error) }, 'could not record event');
      });
    }
  }
}
