// Re-application safety (#15.2, docs/gitops.md): a run deleted by its ttlSecondsAfterFinished
// and then applied again (Argo CD with selfHeal, or on its next sync; Flux on its next
// interval: both create whatever in Git is missing from the cluster) must not run again and
// spend tokens again. Before the operator deletes a run for its TTL it records the run's name
// and spec digest in the namespace's ConfigMap chamvi-finished-runs; a new run with that name
// and the same spec is not run: it ends at once in the recorded phase with reason
// AlreadyFinished, and is kept (no TTL), so the GitOps tool sees it Synced and healthy and
// stops re-creating it. A new name, or any change of the spec, runs. A run deleted by a person
// or pruned by the GitOps tool is not recorded: deleting is how one asks for a run again. Nor
// is a run that did no work (didWork): the operator writes the record for whoever created the
// run, and a run refused, or cancelled before its agent started, costs its author nothing.
//
// The ConfigMap carries the operator's managed-by label, so the controller reads it from its
// cache: no request per run. Anyone who may write ConfigMaps in the namespace can edit it;
// the worst that does is keep a run of that namespace from running. A run a CodingEval or a
// CodingSchedule controls is never one a GitOps tool applies again (appliesToRun), and its
// outcome is graded or counted: a record written ahead for its name (an eval's attempt names
// and specs can be computed) would have ended it in the record's phase, and an eval graded that.
// Pure.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { GROUP, TERMINAL_PHASES, type CodingRun, type Phase } from '../api/index.ts';
import { EVAL_KIND } from '../api/coding-eval.ts';
import { SCHEDULE_KIND } from '../api/coding-schedule.ts';
import { canonicalJson } from './canonical-json.ts';
import { findCondition } from './conditions.ts';

export const FINISHED_RUNS_CONFIG_MAP = 'chamvi-finished-runs';
/**
 * Runs remembered per namespace; past it the ones deleted longest ago are forgotten. About
 * 250 bytes each: the ConfigMap stays well under its 1 MiB, and under what the operator's
 * cache holds per namespace.
 */
export const FINISHED_RUNS_KEPT = 1000;

const record = z.object({
  uid: z.string().max(64),
  specSha256: z.string().regex(/^[0-9a-f]{64}$/),
  phase: z.enum([...TERMINAL_PHASES] as [Phase, ...Phase[]]),
  reason: z.string().max(128),
  completionTime: z.string().max(64),
  deletedAt: z.string().max(64),
});
export type FinishedRunRecord = z.output<typeof record>;

/**
 * The digest of what the run asks for: its spec as the API server holds it (defaults filled
 * in), keys sorted, without ttlSecondsAfterFinished (when a run is cleaned up is not what it does).
 */
export function specSha256(spec: unknown): string {
  const { ttlSecondsAfterFinished: _ttl, ...rest } = (spec ?? {}) as Record<string, unknown>;
  return createHash('sha256').update(canonicalJson(rest), 'utf8').digest('hex');
}

/**
 * What is kept of a finished run its TTL deletes; nothing for a run no record applies to
 * (madeByRunMakingKind), nor for one that did no work a re-application would repeat (didWork).
 */
export function finishedRunRecord(run: CodingRun, now: Date): FinishedRunRecord | undefined {
  if (madeByRunMakingKind(run) || !didWork(run)) return undefined;
  const status = run.status ?? {};
  return {
    uid: run.metadata.uid ?? '',
    specSha256: specSha256(run.spec),
    phase: status.phase!,
    reason: status.reason ?? '',
    completionTime: status.completionTime ?? now.toISOString(),
    deletedAt: now.toISOString(),
  };
}

/**
 * Whether the run did work its record keeps from being done again: the operator accepted it
 * (Accepted True: validated against the namespace's lists, secrets and policy), and, when it was
 * cancelled, its agent had started (the cancel kept its diff: status.result). The operator
 * writes the record for whoever created the run, and a cancel ends a run in any phase, before
 * validation too: a run created with the cancel annotation and ttlSecondsAfterFinished 0, or
 * cancelled as soon as it was accepted, ended without a sandbox or a token spent, and its record
 * let any author end a future run of that name and spec (one a GitOps repository holds) without
 * running, or push the namespace's FINISHED_RUNS_KEPT records out with runs that did nothing.
 * Such a run, applied again, does what it never did; it is not run twice. A run refused, or
 * cancelled before its agent started, is re-validated when applied again.
 */
export function didWork(run: CodingRun): boolean {
  const status = run.status ?? {};
  if (findCondition(status.conditions, 'Accepted')?.status !== 'True') return false;
  // A cancel in the moment between the agent's start and the write of Running kept no diff
  // (status.result), but its steps and tokens say the agent ran.
  return status.phase !== 'Cancelled' || status.result !== undefined || (status.steps ?? 0) > 0 || status.usage !== undefined;
}

/** The operator's kinds that make runs themselves: each run once, under a name of their own, never applied again. */
const RUN_MAKING_KINDS: ReadonlySet<string> = new Set([EVAL_KIND, SCHEDULE_KIND]);

/**
 * Whether a CodingEval or CodingSchedule of this operator controls the run: a schedule makes
 * its run for a time once (its status records the time; a run TTL-deleted before a lost status
 * write was saved is made again, as before), and an eval makes an attempt's run again only when
 * it was deleted before it was graded, when it must run. Both names can be worked out ahead, so
 * a record (anyone who may write ConfigMaps can write one) would let a run be ended in a phase
 * of someone's choosing. No record applies to such a run, so none is written for it
 * either (it would only take one of the namespace's FINISHED_RUNS_KEPT places). A run whose
 * controller is any other kind may be one a tool re-creates (a composition, a GitOps
 * controller), as the record exists for.
 */
export function madeByRunMakingKind(run: CodingRun): boolean {
  const references = (run.metadata as { ownerReferences?: Array<{ apiVersion?: string; kind?: string; controller?: boolean }> })
    .ownerReferences;
  const controller = references?.find((reference) => reference.controller === true);
  return controller !== undefined && controller.apiVersion?.split('/')[0] === GROUP && RUN_MAKING_KINDS.has(controller.kind ?? '');
}

/**
 * Whether the record stands for this new run: the same spec, and a run that may be applied
 * again (not one madeByRunMakingKind; a record matching one was written for it ahead). Such a run runs.
 */
export function appliesToRun(finished: FinishedRunRecord, run: CodingRun): boolean {
  return !madeByRunMakingKind(run) && finished.specSha256 === specSha256(run.spec);
}

/** The record kept for a run name, if any (a malformed entry is no record). */
export function findFinishedRun(data: Record<string, string> | undefined, name: string): FinishedRunRecord | undefined {
  const raw = data?.[name];
  if (raw === undefined) return undefined;
  try {
    const parsed = record.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether a ConfigMap at the record's name holds what the operator writes there: at most
 * FINISHED_RUNS_KEPT entries, plus the few a replica's write may add before the next prunes.
 * Anyone who may create ConfigMaps can put one there; 170 000 keys took 1.7 s of the event
 * loop every namespace shares to sort, at each try of each run's deletion.
 */
export function isFinishedRunsData(data: Record<string, string> | undefined): boolean {
  return Object.keys(data ?? {}).length <= FINISHED_RUNS_KEPT + FINISHED_RUNS_SLACK;
}

/** The ConfigMap at the record's name is not one the operator keeps (isFinishedRunsData): it is neither read nor written. */
export class ForeignFinishedRunsError extends Error {
  constructor(namespace: string, entries: number) {
    super(
      `ConfigMap ${namespace}/${FINISHED_RUNS_CONFIG_MAP} holds ${entries} entries, more than the ${FINISHED_RUNS_KEPT} the operator keeps there: ` +
        'it is not the record of finished runs the operator writes; delete it (the operator makes it again)',
    );
  }
}

/** Entries over FINISHED_RUNS_KEPT a record may hold before it is judged not the operator's. */
const FINISHED_RUNS_SLACK = 16;

/** The ConfigMap's data with the run's record added (or replaced), the longest-deleted ones forgotten past FINISHED_RUNS_KEPT. */
export function withFinishedRun(
  data: Record<string, string> | undefined,
  name: string,
  finished: FinishedRunRecord,
  kept = FINISHED_RUNS_KEPT,
): Record<string, string> {
  const entries = Object.entries({ ...data, [name]: JSON.stringify(finished) });
  if (entries.length <= kept) return Object.fromEntries(entries);
  // Each entry's time read once (not twice per comparison); one that is no record sorts first, and goes first.
  const dated = entries.map(([key, raw]) => ({ key, raw, deletedAt: findFinishedRun({ [key]: raw }, key)?.deletedAt ?? '' }));
  dated.sort((a, b) => a.deletedAt.localeCompare(b.deletedAt));
  return Object.fromEntries(dated.slice(dated.length - kept).map(({ key, raw }) => [key, raw]));
}

/** status.message of a run that is not run again. */
export function alreadyFinishedMessage(finished: FinishedRunRecord): string {
  return (
    `Not run again: a run of this name with this spec finished ${finished.phase}` +
    `${finished.reason ? ` (${finished.reason})` : ''} at ${finished.completionTime} and was deleted after its ` +
    'ttlSecondsAfterFinished; this is the same run applied again (by a GitOps sync?). To run the task again, ' +
    'give the run a new name or change its spec (docs/gitops.md).'
  );
}
