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
  DELETING_RUN_RECHECK_MS,
  EVAL_EVENT_REASONS,
  RUNS_FORBIDDEN_RETRY_MS,
  attemptStatusOf,
  decideEval,
  foreignAttempt,
  hasEnded,
  refusedAttempt,
  refusedEval,
  tooLargeEval,
  type CreatesDone,
  type EvalDecision,
  type EvalEvent,
} from '../evals/decide-eval.ts';
import { attemptOfRun, attemptRun, cellKey, type PlannedAttempt } from '../evals/eval-matrix.ts';
import { gradeAttempt } from '../evals/graders.ts';
import { parseEvalSpec } from '../evals/parse-eval.ts';
import { runEvidence, gradedParts } from '../evals/run-evidence.ts';
import { isTooLargeToStore, statusCodeOf } from '../kube/api-errors.ts';
import type { EvalGateway } from '../kube/eval-gateway.ts';
import type { ObjectCache } from './run-reconciler.ts';
import { WriteGate } from './write-gate.ts';

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
 * as written. A run being deleted is none: the API server raises the generation of an object
 * with finalizers when it marks it for deletion, so it can no longer be told from one changed
 * (isAttemptRunBeingDeleted).
 */
export function isAttemptRun(run: CodingRun, evaluation: CodingEval, spec: CodingEvalSpec): boolean {
  if (run.metadata.deletionTimestamp) return false;
  return madeAsTheEvalMakes(run, evaluation, spec) && (run.metadata.generation ?? 1) === 1;
}

/**
 * The name, labels, creator, controller and spec the eval gives the attempt's run: all of
 * isAttemptRun but the generation (which a deletion raises too).
 */
function madeAsTheEvalMakes(run: CodingRun, evaluation: CodingEval, spec: CodingEvalSpec): boolean {
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
    // Never changed besides: the operator never writes a run's spec, and the API server counts
    // every change in generation (isAttemptRun). A spec compared only as it is now passed a
    // budget raised for the run's steps and put back before it ended.
    isDeepStrictEqual(run.spec, JSON.parse(JSON.stringify(expected.spec)))
  );
}

/**
 * How long an attempt waits for a run of the eval's being deleted under its name. The operator's
 * finalizer lets a run go once its sandbox and jobs are gone, in seconds to a few minutes; a run
 * held longer is someone else's doing (whoever may create and delete runs in the namespace can
 * make one as the eval makes it, with a finalizer of their own, and delete it), and its attempt
 * is then failed as foreign rather than left waiting for good.
 */
export const DELETING_RUN_WAIT_MS = 10 * 60_000;

/**
 * Whether the run is the eval's own for the attempt its labels name (as isAttemptRun, but for
 * the generation, which the deletion raised), being deleted (a person, its TTL) for less than
 * DELETING_RUN_WAIT_MS. It is neither graded nor foreign: it holds the attempt's name until its
 * finalizer lets it go, then the eval makes the attempt's run again. Any other run being
 * deleted under the name is foreign, as it was before it was deleted.
 */
export function isAttemptRunBeingDeleted(run: CodingRun, evaluation: CodingEval, spec: CodingEvalSpec, now: Date): boolean {
  const since = run.metadata.deletionTimestamp;
  if (since === undefined) return false;
  const deletingMs = now.getTime() - new Date(since).getTime();
  return deletingMs < DELETING_RUN_WAIT_MS && madeAsTheEvalMakes(run, evaluation, spec);
}

/** The eval's runs: those it made, as it made them (isAttemptRun). */
export function runsOfEval(runs: readonly CodingRun[], evaluation: CodingEval, spec: CodingEvalSpec): CodingRun[] {
  return runs.filter((run) => isAttemptRun(run, evaluation, spec));
}

/** The one Warning Event for attempts failed ForeignRun in a pass, naming the first and why. */
function foreignRunEvents(foreign: readonly AttemptStatus[]): EvalEvent[] {
  if (foreign.length === 0) return [];
  const first = foreign[0]!;
  const why = first.failedGraders?.[0] ?? '';
  // A not-run attempt's why does not name its run; a foreign one's does.
  const message = why.includes(first.run) ? why : `${first.run}: ${why}`;
  return [
    { type: 'Warning', reason: EVAL_EVENT_REASONS.ForeignRun, message: `${foreign.length} attempt(s) failed ForeignRun: ${message}` },
  ];
}

/**
 * Why the API server would not store an attempt's run, and what to shorten: the run carries
 * its task's text, sandbox and verify and its model's instructions. Short, as the attempt keeps
 * 160 characters of it (after "the API server refused the run: ").
 */
const tooLargeRunRefusal = (code: number) =>
  `the eval's run is too large to store (HTTP ${code}): shorten the task's text, sandbox or verify, or the model's instructions`;

export class EvalReconciler {
  private readonly now: () => Date;
  /**
   * Evals (key → uid) stopped because the API server would not store their status: not graded
   * again before the informer brings the Failed status, nor when even the cut one did not fit.
   */
  private readonly stopped = new Map<string, string>();
  /**
   * Closed by stop(): no write is sent after it (write-gate.ts). A reconcile still grading when
   * the lease was lost created its runs and wrote its status beside the new leader's, from
   * caches that no longer follow the cluster.
   */
  private readonly writes = new WriteGate();

  constructor(private readonly deps: EvalReconcilerDeps) {
    this.now = deps.now ?? (() => new Date());
  }

  /** No reconcile writes anything after this, the ones in flight included; what they had sent stays sent. */
  stop(): void {
    this.writes.close();
  }

  async reconcile(key: string): Promise<{ requeueAfterMs: number } | void> {
    return this.writes.unlessStopped(
      () => this.reconcileOnce(key),
      () => {
        const [namespace, name] = key.split('/');
        this.deps.logger.info({ namespace, eval: name }, 'eval reconcile stopped before its next write: this replica no longer leads');
      },
    );
  }

  private async reconcileOnce(key: string): Promise<{ requeueAfterMs: number } | void> {
    const [namespace, name] = key.split('/') as [string, string];
    const evaluation = this.deps.evals.get(namespace, name);
    if (!evaluation) this.stopped.delete(key);
    if (!evaluation || evaluation.metadata.deletionTimestamp) return;
    // An eval that ended (Complete, or Failed: InvalidSpec, StatusTooLarge) is left as it is, its
    // spec not checked again: its status is all that is left of what it measured (hasEnded).
    if (hasEnded(evaluation) || this.stopped.get(key) === evaluation.metadata.uid) return;
    const parsed = parseEvalSpec(evaluation);
    if (!parsed.ok) {
      await this.apply(evaluation, refusedEval(evaluation, parsed.problem, this.now()));
      return;
    }
    const runs = runsOfEval(this.deps.runs.list(), evaluation, parsed.spec);
    const graded = new Set((evaluation.status?.attempts ?? []).map((attempt) => cellKey(attempt.task, attempt.model, attempt.attempt)));
    // Runs being deleted under the names of attempts not graded yet: those attempts wait for
    // them to go. A run's deletion wakes the eval only when the run names it as its
    // controller, so the eval also looks again.
    const now = this.now();
    const going = this.deps.runs.list().filter((run) => {
      const cell = attemptOfRun(run.metadata.labels);
      return (
        cell && isAttemptRunBeingDeleted(run, evaluation, parsed.spec, now) && !graded.has(cellKey(cell.task, cell.model, cell.attempt))
      );
    });
    const recheck = going.length > 0 ? { requeueAfterMs: DELETING_RUN_RECHECK_MS } : undefined;
    const fresh: AttemptStatus[] = [];
    for (const run of runs) {
      const cell = attemptOfRun(run.metadata.labels);
      if (!cell || !isTerminal(run.status?.phase) || graded.has(cellKey(cell.task, cell.model, cell.attempt))) continue;
      const task = parsed.spec.tasks.find((candidate) => candidate.name === cell.task);
      if (!task) continue;
      const evidence = await this.evidenceOf(run);
      fresh.push(attemptStatusOf(run, cell, evidence, gradeAttempt(task.graders, evidence)));
    }
    // Runs that ended from a record in chamvi-finished-runs without running fail ForeignRun (gradeAttempt): said once, as they are graded.
    const notRun = fresh.filter((attempt) => attempt.failure === 'ForeignRun');
    const decision = decideEval(evaluation, parsed.spec, [...runs, ...going], fresh, this.now());
    if (decision.create.length === 0)
      return (await this.apply(evaluation, { ...decision, events: [...decision.events, ...foreignRunEvents(notRun)] }))
        ? recheck
        : undefined;
    // A run the API server refuses as invalid (an admission policy, a schema rule) or too large
    // to store would be refused again on every retry: its attempt is graded as failed
    // RunRefused, with the reason.
    // A 403 (a ResourceQuota on codingruns below parallelism, a webhook) may pass later: the
    // creates stop there, the status says why, and the eval tries again.
    const refused: AttemptStatus[] = [];
    const foreign: AttemptStatus[] = [];
    const created: PlannedAttempt[] = [];
    let forbidden: string | undefined;
    let deleting = recheck !== undefined;
    for (const planned of decision.create) {
      const manifest = attemptRun(evaluation, parsed.spec, planned);
      const cell = { task: planned.task.name, model: planned.model.name, attempt: planned.attempt };
      this.writes.check();
      const outcome = await this.createRun(manifest);
      if (outcome === 'created') created.push(planned);
      else if (outcome === 'exists') {
        // Ours when the cache had not seen it yet (a retry after a crash), or gone again (the
        // next reconcile makes it); being deleted, it is made again once gone; else someone
        // took the name first or changed the run.
        const holder = await this.deps.gateway.getRun(manifest.metadata.namespace, manifest.metadata.name);
        if (holder !== undefined && isAttemptRunBeingDeleted(holder, evaluation, parsed.spec, this.now())) deleting = true;
        else if (holder === undefined || isAttemptRun(holder, evaluation, parsed.spec)) created.push(planned);
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
    const after = decideEval(evaluation, parsed.spec, [...runs, ...going], [...fresh, ...refused, ...foreign], this.now(), done);
    const events = [...after.events];
    if (refused.length > 0)
      events.push({
        type: 'Warning',
        reason: EVAL_EVENT_REASONS.RunRefused,
        message: `the API server refused ${refused.length} run(s): ${refused[0]!.failedGraders![0]!}`,
      });
    events.push(...foreignRunEvents([...notRun, ...foreign]));
    if (!(await this.apply(evaluation, { ...after, events }))) return;
    if (forbidden !== undefined) return { requeueAfterMs: RUNS_FORBIDDEN_RETRY_MS };
    if (deleting) return { requeueAfterMs: DELETING_RUN_RECHECK_MS };
  }

  /**
   * Creates the attempt's run. One too large to store (etcd's "request is too large", HTTP 500,
   * or a 413) is a refusal: sent again unchanged it is refused again, and thrown, the eval was
   * retried for ever before its first status write, with no phase and no word of why.
   */
  private async createRun(manifest: Parameters<EvalGateway['createRun']>[0]): ReturnType<EvalGateway['createRun']> {
    try {
      return await this.deps.gateway.createRun(manifest);
    } catch (error) {
      if (!isTooLargeToStore(error)) throw error;
      return { refused: tooLargeRunRefusal(statusCodeOf(error)!) };
    }
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

  /** Writes the status and records the Events; false when the status was too large to store and the eval stopped. */
  private async apply(evaluation: CodingEval, decision: EvalDecision): Promise<boolean> {
    if (!isDeepStrictEqual(decision.status, evaluation.status ?? {})) {
      try {
        this.writes.check();
        await this.deps.gateway.replaceEvalStatus(evaluation, decision.status);
      } catch (error) {
        if (!isTooLargeToStore(error)) throw error;
        await this.stopTooLarge(evaluation, decision);
        return false;
      }
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
    await this.record(evaluation, decision.events);
    return true;
  }

  private async record(evaluation: CodingEval, events: readonly EvalEvent[]) {
    for (const event of events) {
      this.writes.check();
      await this.deps.gateway.recordEvent(evaluation, event, this.deps.identity).catch((error: unknown) => {
        this.deps.logger.warn({ eval: evaluation.metadata.name, reason: event.reason, err: String(error) }, 'could not record event');
      });
    }
  }

  /**
   * The API server would not store the eval's status (etcd's size limit on spec and status
   * together): every later write of it would be refused too, each after re-reading finished
   * runs on the queue every namespace shares. The eval stops, Failed StatusTooLarge, with its
   * status cut to what fits: the figures without the attempts, else only the counts. Should not
   * even that fit (a spec at the limit), the Warning Event says so, and this operator does not
   * grade it again.
   */
  private async stopTooLarge(evaluation: CodingEval, decision: EvalDecision): Promise<void> {
    const fields = { eval: evaluation.metadata.name, namespace: evaluation.metadata.namespace };
    // This pass's creates, refusals and foreign runs happened; that the eval is complete was not stored.
    const events = decision.events.filter((event) => event.reason !== EVAL_EVENT_REASONS.Complete);
    let stopped = tooLargeEval(evaluation, decision.status, 'results', this.now());
    try {
      this.writes.check();
      await this.deps.gateway.replaceEvalStatus(evaluation, stopped.status);
    } catch (error) {
      if (!isTooLargeToStore(error)) throw error;
      stopped = tooLargeEval(evaluation, decision.status, 'counts', this.now());
      try {
        this.writes.check();
        await this.deps.gateway.replaceEvalStatus(evaluation, stopped.status);
      } catch (again) {
        if (!isTooLargeToStore(again)) throw again;
        this.deps.logger.warn({ ...fields, written: false }, stopped.status.message!);
      }
    }
    this.stopped.set(`${evaluation.metadata.namespace}/${evaluation.metadata.name}`, evaluation.metadata.uid);
    this.deps.logger.warn(fields, 'eval stopped: its status is too large to store');
    await this.record(evaluation, [...events, ...stopped.events]);
  }
}
