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
// the summaries, in the prompt. That list, and the template's writer, are on the source only once
// the source itself has been accepted, and a run applied together with its source (GitOps) can be
// looked at first: so a run whose source has not finished is refused at acceptance (InvalidSpec,
// before it takes a slot), as the prepare job refused it before the pin. It does not wait: a run
// naming itself, or two naming each other, would wait forever, and a source with a short TTL could
// be gone before a waiting run saw it end. Pure: the reconciler hands over what its cache of runs
// shows.
import {
  CONTINUED_FROM_WRITERS_MAX,
  FAILURE_MESSAGES,
  REASONS,
  isTerminal,
  type CodingRun,
  type CodingRunSpec,
  type ContinuedFromStatus,
} from '../api/index.ts';
import { findCondition } from './conditions.ts';
import { CREATOR_ANNOTATION, TEMPLATE_WRITER_ANNOTATION } from './approval-answer.ts';
import type { ObservedRun } from './observed-run.ts';
import { parseSpec, type Refusal } from './validate-run.ts';
import { cutUserName } from './user-name.ts';

/** The run spec.continueFrom names, as found in the run's namespace while the run is accepted. */
export interface ContinueFromSource {
  name: string;
  /** Its metadata.uid; undefined when no run of that name is there. */
  uid: string | undefined;
  /** Who wrote its task and what it started from (writersOf), without repeats; none when unnamed. */
  writtenBy?: string[];
  /** Its phase ('none yet' while it has none) when it has not finished; absent once it has. */
  unfinishedPhase?: string;
  /** Set when it was never accepted (refused, or cancelled first): its template's writer and its own list were never recorded. */
  neverAccepted?: true;
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
  const unfinished = isTerminal(source.status?.phase) ? {} : { unfinishedPhase: source.status?.phase ?? 'none yet' };
  const neverAccepted = findCondition(source.status?.conditions, 'Accepted')?.status === 'True' ? {} : { neverAccepted: true as const };
  return {
    continueFromSource: {
      name,
      uid: source.metadata.uid || undefined,
      ...(writtenBy.length ? { writtenBy } : {}),
      ...unfinished,
      ...neverAccepted,
    },
  };
}

/**
 * Everyone who wrote `source`'s task or what it started from, as separation of duties names
 * them for the source itself: its creator, its template's writer (a scheduled run's annotation,
 * or the operator's record for one made with spec.templateRef), and its own continuedFrom list.
 * Cut at code points as the approver's name is read (user-name.ts), so the two compare alike.
 */
export function writersOf(source: CodingRun): string[] {
  const annotations = source.metadata.annotations ?? {};
  const names = [
    annotations[CREATOR_ANNOTATION],
    annotations[TEMPLATE_WRITER_ANNOTATION],
    source.status?.template?.writtenBy,
    ...(source.status?.continuedFrom?.writtenBy ?? []),
  ];
  return [...new Set(names.filter((name): name is string => !!name).map(cutUserName))];
}

export type ContinueFromPin = { ok: true; pin?: ContinuedFromStatus } | { ok: false; refusal: Refusal };

/**
 * What accepting the run records of its source: the pin (status.continuedFrom), nothing without
 * continueFrom, or a refusal when no run has the name or it has not finished: there is nothing
 * (yet) to start from, and the prepare job would refuse it anyway, after the run had taken a slot
 * and a sandbox; and who wrote what an unfinished source started from is not all on it before it
 * is accepted. A source that ended refused (no commit) is pinned as any other, and the prepare job
 * refuses it, saying why, before any approval is asked.
 */
export function pinContinueFrom(namespace: string, spec: CodingRunSpec, source: ContinueFromSource | undefined): ContinueFromPin {
  const named = spec.continueFrom?.name;
  if (!named) return { ok: true };
  if (source?.name !== named) throw new Error('decide: the continueFrom source must be observed for a run that is not accepted yet');
  if (!source.uid)
    return { ok: false, refusal: { reason: REASONS.InvalidSpec, message: FAILURE_MESSAGES.continueFromMissing(named, namespace) } };
  // A run naming itself is its own unfinished source, and is refused here too.
  if (source.unfinishedPhase !== undefined)
    return {
      ok: false,
      refusal: {
        reason: REASONS.InvalidSpec,
        message:
          `spec.continueFrom names CodingRun ${named}, which has not finished (phase ${source.unfinishedPhase}); wait for it ` +
          `(kubectl wait --for=condition=Reconciling=False crun/${named}) and create this run again.`,
      },
    };
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

/**
 * The pin of a run that is past acceptance and has none: the warm-pool path accepts a run in the
 * write that also makes it Running, and when that write meets a conflict the workers' own
 * Running lands first, so the run is accepted (decide.ts recordAgentStart) without the record of
 * who wrote its source. Whatever this run's phase, the source as found now is pinned once it has
 * finished and had itself been accepted: before that its writers are not all on it, and a pin of
 * part of them would let the others answer. Undefined when there is nothing to pin: no
 * continueFrom, no such run now, one not finished or never accepted, or more writers than a pin
 * keeps; separation of duties then refuses every answer (separation-of-duties.ts), as the chart's
 * policy does, and a later look pins it once the source has finished.
 */
export function pinAfterAcceptance(
  namespace: string,
  spec: CodingRunSpec,
  source: ContinueFromSource | undefined,
): ContinuedFromStatus | undefined {
  if (!spec.continueFrom?.name || source?.name !== spec.continueFrom.name) return undefined;
  if (source.unfinishedPhase !== undefined || source.neverAccepted) return undefined;
  const pinned = pinContinueFrom(namespace, spec, source);
  return pinned.ok ? pinned.pin : undefined;
}
