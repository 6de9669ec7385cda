// Fair share (issue #15.4): which waiting runs get a sandbox slot now, taking turns between
// namespaces instead of first come first served, so one team's burst cannot take every slot.
// Pure: the queued runs of each namespace (oldest first), the free cluster slots, each
// namespace's own limits and the namespace served last in, the admissions and the queue
// positions out. admission.ts gathers the input from the cache; decide.ts acts on the result.

import type { HeldBy } from '../api/index.ts';

export type { HeldBy };

export interface NamespaceLimits {
  /** Runs of the namespace holding a slot now. */
  active: number;
  /** The namespace's own cap on active runs (chamvi.dev/max-active-runs); undefined is only the cluster's. */
  maxActiveRuns?: number;
  /** The namespace has spent its tokens for the day (chamvi.dev/tokens-per-day): it is admitted nothing. */
  outOfBudget?: boolean;
}

export interface FairAdmissionInput {
  /** Waiting runs by namespace, each list oldest first. */
  queued: ReadonlyMap<string, readonly string[]>;
  /** Cluster slots free now: maxActiveRuns minus the runs holding one. */
  freeSlots: number;
  /** Per namespace with queued runs; a namespace missing here has no limits of its own. */
  limits: ReadonlyMap<string, NamespaceLimits>;
  /** The namespace of the run admitted last; its turn has passed. Undefined: start at the first by name. */
  lastServed?: string;
}

export interface WaitingPlace {
  namespace: string;
  heldBy: HeldBy;
  /**
   * For runs held only by the cluster's slots: their place in the order in which the slots
   * that free up go (1 is next), if no other run arrives. Absent for runs their namespace's
   * own limit holds, whose place depends on when the namespace's runs finish.
   */
  position?: number;
}

export interface FairAdmission {
  /** Runs to admit now, in the order they are served. */
  admitted: string[];
  /** Every queued run not admitted, and why. */
  waiting: Map<string, WaitingPlace>;
}

/** Namespaces in turn order: by name, starting with the first after the last one served. */
export function turnOrder(namespaces: Iterable<string>, lastServed: string | undefined): string[] {
  const sorted = [...namespaces].sort();
  if (lastServed === undefined) return sorted;
  const next = sorted.findIndex((namespace) => namespace > lastServed);
  return next < 0 ? sorted : [...sorted.slice(next), ...sorted.slice(0, next)];
}

/**
 * Round-robin over namespaces: each turn gives one slot to the oldest run of the next
 * namespace that may take one (under its own active-run cap, within its token budget). The
 * same rounds, continued past the free slots, give the waiting runs their queue positions.
 */
export function decideFairAdmission(input: FairAdmissionInput): FairAdmission {
  const admitted: string[] = [];
  const waiting = new Map<string, WaitingPlace>();
  const order = turnOrder(
    [...input.queued].filter(([, runs]) => runs.length > 0).map(([namespace]) => namespace),
    input.lastServed,
  );
  const next = new Map(order.map((namespace) => [namespace, 0]));
  const room = new Map(
    order.map((namespace) => {
      const limits = input.limits.get(namespace);
      if (limits?.outOfBudget) return [namespace, 0];
      const cap = limits?.maxActiveRuns;
      return [namespace, cap === undefined ? Infinity : Math.max(0, cap - limits!.active)];
    }),
  );
  let served = 0;
  for (let progressed = true; progressed;) {
    progressed = false;
    for (const namespace of order) {
      const runs = input.queued.get(namespace)!;
      const index = next.get(namespace)!;
      if (index >= runs.length || room.get(namespace)! <= 0) continue;
      next.set(namespace, index + 1);
      room.set(namespace, room.get(namespace)! - 1);
      progressed = true;
      served++;
      if (served <= input.freeSlots) admitted.push(runs[index]!);
      else waiting.set(runs[index]!, { namespace, heldBy: 'ClusterSlots', position: served - Math.max(0, input.freeSlots) });
    }
  }
  // What the rounds never reached is held by its own namespace's limit.
  for (const namespace of order) {
    const heldBy: HeldBy = input.limits.get(namespace)?.outOfBudget ? 'NamespaceTokenBudget' : 'NamespaceActiveRuns';
    for (const run of input.queued.get(namespace)!.slice(next.get(namespace))) waiting.set(run, { namespace, heldBy });
  }
  return { admitted, waiting };
}
