// spec.continueFrom, pinned by uid as the run is accepted (status.continuedFrom). The prepare
// job reads the source run long after (a queued run waits for a slot, for hours at times) and
// by name; anyone who may create runs in the namespace could delete the source and create
// another under its name in between, and the run would start from that one's commit, diff and
// summary. So the source is the run of that name as acceptance found it, and the prepare job
// (workers/continuation.ts) starts only from the run with that uid.
//
// A run accepted before the pin existed has none, and the prepare job finds its source by name
// as it always did. Pure: the reconciler hands over what its cache of runs shows.
import { FAILURE_MESSAGES, REASONS, type CodingRun, type CodingRunSpec, type ContinuedFromStatus } from '../api/index.ts';
import type { ObservedRun } from './observed-run.ts';
import { parseSpec, type Refusal } from './validate-run.ts';

/** The run spec.continueFrom names, as found in the run's namespace while the run is accepted. */
export interface ContinueFromSource {
  name: string;
  /** Its metadata.uid; undefined when no run of that name is there. */
  uid: string | undefined;
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
  return { continueFromSource: { name, uid: runs.get(run.metadata.namespace, name)?.metadata.uid || undefined } };
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
  return { ok: true, pin: { name: named, uid: source.uid } };
}
