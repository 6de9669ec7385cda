// Which of the pods with a pool's label that no pool wants (planted, a predecessor's, those of
// a pool taken out of the config) the pool loop deletes in one pass, and which wait for the
// next. Anyone who may create pods in a watched namespace can plant pods with the operator's
// labels, hundreds of them, and each costs the loop one DELETE: taken all in one pass, they
// held the pass, and with it every pool's refill after a claim, for seconds. So a pass takes
// a few per namespace, in turn across namespaces, and a few in all; the rest go in the passes
// right after, each of which keeps the pools first and starts where the one before stopped.

export interface UnwantedDeleteLimits {
  /** Deletes of one namespace in one pass: one namespace's planted pods never fill a pass. */
  perNamespace: number;
  /** Deletes in one pass, all namespaces together: many namespaces' planted pods neither. */
  perPass: number;
}

export const UNWANTED_DELETE_LIMITS: UnwantedDeleteLimits = { perNamespace: 10, perPass: 40 };

/**
 * The pods to delete now, taken one namespace after another in turn, each namespace's in the
 * order given; those left for later; and the namespace of the last pod taken, for the next
 * pass's `startAfter`. Namespaces go in name order from the first one after `startAfter`,
 * round to the start: begun at the same namespace every pass, namespaces whose pods are
 * planted again as fast as they are deleted would fill every pass, and the namespaces after
 * them would never have a pod deleted.
 */
export function pickUnwantedDeletes<T extends { namespace: string }>(
  pods: readonly T[],
  limits: UnwantedDeleteLimits = UNWANTED_DELETE_LIMITS,
  startAfter?: string,
): { now: T[]; later: T[]; lastNamespace: string | undefined } {
  const byNamespace = new Map<string, T[]>();
  for (const pod of pods) {
    const queue = byNamespace.get(pod.namespace) ?? [];
    byNamespace.set(pod.namespace, queue);
    queue.push(pod);
  }
  // Code-unit order, not the locale's: the same on every replica.
  const names = [...byNamespace.keys()].sort();
  const after = startAfter === undefined ? -1 : names.findIndex((name) => name > startAfter);
  const first = after === -1 ? 0 : after;
  const queues = [...names.slice(first), ...names.slice(0, first)].map((name) => byNamespace.get(name)!);
  const now: T[] = [];
  for (let round = 0; round < limits.perNamespace && now.length < limits.perPass; round++) {
    for (const queue of queues) {
      if (now.length >= limits.perPass) break;
      const pod = queue[round];
      if (pod !== undefined) now.push(pod);
    }
  }
  const taken = new Set(now);
  return { now, later: pods.filter((pod) => !taken.has(pod)), lastNamespace: now.at(-1)?.namespace ?? startAfter };
}
