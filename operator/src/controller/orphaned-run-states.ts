// Which run states in Redis belong to no run any more: the runs deleted while no operator ran,
// or during a leader handover (the new leader never saw them deleted), had no finalizer path
// and no watch event to stop their agent, so their state (no TTL) and its bytes in their
// namespace's tally stayed for good. The leader's sweep (orphaned-state-sweep.ts) lists the
// states and asks these functions which to stop. Pure.
//
// A state with no run in the cache is not stopped at first sight: the cache lags a create (a
// run's first state is written by its prepare job, which a replica may run before the leader's
// watch shows the run), so a state is stopped only once two sweeps at least `graceMs` apart found
// it without a run.

/** How long a state must be seen without a run before it is stopped: far longer than the cache lags a create. */
export const ORPHAN_GRACE_MS = 60_000;

/** A run's identity as its state records it. */
export interface StateRunRef {
  uid: string;
  namespace: string;
  name: string;
}

/**
 * Whose a state is, as the state itself says: `ref` when it was sealed by this operator for
 * the uid it is kept under; `invalid` (why) when it cannot be trusted; undefined when it is gone.
 */
export type StateOwner = { ref: StateRunRef } | { invalid: string } | undefined;

/** A state found without a run: since when, and whether it was judged not this operator's to stop. */
export interface OrphanSighting {
  /** Epoch ms of the first sweep that found it without a run. */
  since: number;
  /** Looked at and left (orphanVerdict): not looked at again while its state stays. */
  leftAlone?: true;
}

export interface OrphanedStatesInput {
  /** The uids that have a state in Redis, as this sweep's listing found them. */
  stateUids: Iterable<string>;
  /** The uids of every run in the cache, read after the listing. */
  runUids: ReadonlySet<string>;
  /** The earlier sweeps' sightings (the last result's `sightings`). */
  sightings: ReadonlyMap<string, OrphanSighting>;
  now: number;
  graceMs: number;
}

export interface OrphanedStates {
  /** The uids whose state to stop now, sorted: found without a run at least graceMs ago, and now. */
  due: string[];
  /** The states without a run this sweep found, for the next: a state gone or with a run again is forgotten. */
  sightings: Map<string, OrphanSighting>;
}

export function orphanedRunStates(input: OrphanedStatesInput): OrphanedStates {
  const sightings = new Map<string, OrphanSighting>();
  const due: string[] = [];
  for (const uid of input.stateUids) {
    if (input.runUids.has(uid) || sightings.has(uid)) continue;
    const before = input.sightings.get(uid);
    const sighting = before ?? { since: input.now };
    sightings.set(uid, sighting);
    if (before && !before.leftAlone && input.now - before.since >= input.graceMs) due.push(uid);
  }
  return { due: due.sort(), sightings };
}

/** What to do with a due state, once read. */
export type OrphanVerdict =
  | { stop: StateRunRef }
  /** Gone since the listing (its run's end, or a stop elsewhere): nothing to do. */
  | { leave: 'gone' }
  /** Its run's namespace is not watched: the cache cannot say whether the run exists. */
  | { leave: 'unwatched'; ref: StateRunRef }
  /** Not a state this operator can read (another stateKey, tampered): what it names cannot be trusted. */
  | { leave: 'unreadable'; problem: string };

/**
 * Whether to stop the run a due state names. Only a run of a watched namespace (all when
 * watchNamespaces is empty): the cache holds no other, so a state of a run elsewhere would be
 * stopped while its run lives. Only a state sealed by this operator: Redis is not trusted
 * (security #11.1), and a state it cannot read names no namespace whose tally to fix.
 */
export function orphanVerdict(owner: StateOwner, watchNamespaces: readonly string[]): OrphanVerdict {
  if (owner === undefined) return { leave: 'gone' };
  if ('invalid' in owner) return { leave: 'unreadable', problem: owner.invalid };
  if (watchNamespaces.length > 0 && !watchNamespaces.includes(owner.ref.namespace)) return { leave: 'unwatched', ref: owner.ref };
  return { stop: owner.ref };
}
