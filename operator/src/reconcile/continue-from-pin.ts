// spec.continueFrom, pinned by uid as the run is accepted (status.continuedFrom). The prepare
// job reads the source run long after (a queued run waits for a slot, for hours at times) and
// by name; anyone who may create runs in the namespace could delete the source and create
// another under its name in between, and the run would start from that one's commit, diff and
// summary. So the source is the run of that name as acceptance found it, and the prepare job
// (workers/continuation.ts) starts only from the run with that uid.
//
// A run accepted before the pin existed has none, and the prepare job finds its source by name
// as it always did.
//
// The pin also names who wrote what the run starts from (writtenBy): the source's task and
// final message are its first prompt, the source's diff its workspace, so whoever wrote the
// source's task steers this run as much as a template's writer does, and separation of duties
// refuses their answers alike (separation-of-duties.ts, the chart's approval-policy.yaml). The
// source's own list comes along: a chain's first task is still in the workspace and, through
// the summaries, in the prompt. Pure: the reconciler hands over what its cache of runs shows.
import {
  CONTINUED_FROM_WRITERS_MAX,
  FAILURE_MESSAGES,
  REASONS,
  type CodingRun,
  type CodingRunSpec,
  type ContinuedFromStatus,
} from '../api/index.ts';
import { CREATOR_ANNOTATION, TEMPLATE_WRITER_ANNOTATION, USER_MAX } from './approval-answer.ts';
import type { ObservedRun } from './observed-run.ts';
import { parseSpec, type Refusal } from './validate-run.ts';

/** The run spec.continueFrom names, as found in the run's namespace while the run is accepted. */
export interface ContinueFromSource {
  name: string;
  /** Its metadata.uid; undefined when no run of that name is there. */
  uid: string | undefined;
  /** Who wrote its task and what it started from (writersOf), without repeats; none when unnamed. */
  writtenBy?: string[];
}

/** Where the reconciler finds runs: its informer cache (a GET would be one more request per run accepted). */
export interface RunLookup {
  get(namespace: string, name: string): CodingRun | undefined;
}

/**
 * For a run being accepted: the run its effective spec (a template may set continueFrom) names
 * in its own namespace, never another. Nothing for a run without continueFrom. A cache a moment
 * behind is safe: a source deleted since is pinned and then not found, one made since is not
 * found (it cannot have finished yet, which a source must have).
 */
export function observeContinueFromSource(run: CodingRun, runs: RunLookup): Pick<ObservedRun, 'continueFromSource'> {
  const parsed = parseSpec(run);
  const name = parsed.ok ? parsed.spec.continueFrom?.name : undefined;
  if (!name) return {};
  const source = runs.get(run.metadata.namespace, name);
  if (!source) return { continueFromSource: { name, uid: undefined } };
  const writtenBy = writersOf(source);
  return { continueFromSource: { name, uid: source.metadata.uid || undefined, ...(writtenBy.length ? { writtenBy } : {}) } };
}

/**
 * Everyone who wrote `source`'s task or what it started from, as separation of duties names
 * them for the source itself: its creator, its template's writer (a scheduled run's annotation,
 * or the operator's record for one made with spec.templateRef), and its own continuedFrom list.
 * Cut to USER_MAX as the approver's name is read, so the two compare alike.
 */
export function writersOf(source: CodingRun): string[] {
  const annotations = source.metadata.annotations ?? {};
  const names = [
    annotations[CREATOR_ANNOTATION],
    annotations[TEMPLATE_WRITER_ANNOTATION],
    source.status?.template?.writtenBy,
    ...(source.status?.continuedFrom?.writtenBy ?? []),
  ];
  return [...new Set(names.filter((name): name is string => !!name).map((name) => name.slice(0, USER_MAX)))];
}

export type ContinueFromPin = { ok: true; pin?: ContinuedFromStatus } | { ok: false; refusal: Refusal };

/**
 * What accepting the run records of its source: the pin (status.continuedFrom), nothing without
 * continueFrom, or a refusal when no run has the name: there is nothing to pin, and the prepare
 * job would refuse it anyway, after the run had taken a slot and a sandbox.
 */
export function pinContinueFrom(namespace: string, spec: CodingRunSpec, source: ContinueFromSource | undefined): ContinueFromPin {
  const named = spec.continueFrom?.name;
  if (!named) return { ok: true };
  if (source?.name !== named) throw new Error('decide: the continueFrom source must be observed for a run that is not accepted yet');
  if (!source.uid)
    return { ok: false, refusal: { reason: REASONS.InvalidSpec, message: FAILURE_MESSAGES.continueFromMissing(named, namespace) } };
  const writtenBy = source.writtenBy ?? [];
  // Cutting the list would let a writer it drops approve; a chain this long is refused instead.
  if (writtenBy.length > CONTINUED_FROM_WRITERS_MAX)
    return {
      ok: false,
      refusal: {
        reason: REASONS.InvalidSpec,
        message:
          `spec.continueFrom names CodingRun ${named}, whose task and the runs it continued from were written by ` +
          `${writtenBy.length} people, more than the ${CONTINUED_FROM_WRITERS_MAX} a run records to keep them from approving it; ` +
          'start a new run from the repository instead.',
      },
    };
  return { ok: true, pin: { name: named, uid: source.uid, ...(writtenBy.length ? { writtenBy } : {}) } };
}
