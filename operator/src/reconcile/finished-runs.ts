// Re-application safety (#15.2, docs/gitops.md): a run deleted by its ttlSecondsAfterFinished
// and then applied again (Argo CD with selfHeal, or on its next sync; Flux on its next
// interval: both create whatever in Git is missing from the cluster) must not run again and
// spend tokens again. Before the operator deletes a run for its TTL it records the run's name
// and spec digest in the namespace's ConfigMap chamvi-finished-runs; a new run with that name
// and the same spec is not run: it ends at once in the recorded phase with reason
// AlreadyFinished, and is kept (no TTL), so the GitOps tool sees it Synced and healthy and
// stops re-creating it. A new name, or any change of the spec, runs. A run deleted by a person
// or pruned by the GitOps tool is not recorded: deleting is how one asks for a run again.
//
// The ConfigMap carries the operator's managed-by label, so the controller reads it from its
// cache: no request per run. Anyone who may write ConfigMaps in the namespace can edit it;
// the worst that does is keep a run of that namespace from running. Pure.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { TERMINAL_PHASES, type CodingRun, type Phase } from '../api/index.ts';

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

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, each]) => each !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, each]) => `${JSON.stringify(key)}:${canonicalJson(each)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The digest of what the run asks for: its spec as the API server holds it (defaults filled
 * in), keys sorted, without ttlSecondsAfterFinished (when a run is cleaned up is not what it does).
 */
export function specSha256(spec: unknown): string {
  const { ttlSecondsAfterFinished: _ttl, ...rest } = (spec ?? {}) as Record<string, unknown>;
  return createHash('sha256').update(canonicalJson(rest), 'utf8').digest('hex');
}

/** What is kept of a finished run its TTL deletes. */
export function finishedRunRecord(run: CodingRun, now: Date): FinishedRunRecord {
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

/** The ConfigMap's data with the run's record added (or replaced), the longest-deleted ones forgotten past FINISHED_RUNS_KEPT. */
export function withFinishedRun(
  data: Record<string, string> | undefined,
  name: string,
  finished: FinishedRunRecord,
  kept = FINISHED_RUNS_KEPT,
): Record<string, string> {
  const entries = Object.entries({ ...data, [name]: JSON.stringify(finished) });
  if (entries.length <= kept) return Object.fromEntries(entries);
  const deletedAt = (raw: string) => {
    try {
      return String((JSON.parse(raw) as { deletedAt?: unknown }).deletedAt ?? '');
    } catch {
      return '';
    }
  };
  entries.sort(([, a], [, b]) => deletedAt(a).localeCompare(deletedAt(b)));
  return Object.fromEntries(entries.slice(entries.length - kept));
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
