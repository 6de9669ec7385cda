// What a warm pool needs now: how many pods to create, which to delete, and which pod a run
// claims. Pure functions of the pool's unclaimed pods as the cache shows them, its size and
// the time; the pool loop (an adapter) applies the plan and looks again.

/** An unclaimed pod of the pool (it still carries the pool label). */
export interface PoolPodView {
  name: string;
  /** Pending | Running | Succeeded | Failed | Unknown */
  phase: string;
  ready: boolean;
  deleting: boolean;
  /** metadata.creationTimestamp, for the order of claims and of deletions. */
  createdAt: string;
}

export interface PoolPlan {
  /** Pods to create now. */
  create: number;
  /** Pods to delete now: ended ones, then the excess of a pool sized down. */
  delete: string[];
}

/** Pods the pool creates in one pass at most: a pool sized up by hundreds must not stall the API server. */
export const MAX_CREATES_PER_PASS = 20;

const ended = (pod: PoolPodView) => pod.phase === 'Failed' || pod.phase === 'Succeeded';

/**
 * Keep `size` unclaimed pods that are starting or ready. Pods that ended are replaced; a
 * pool above its size deletes first the pods that are not ready yet (they cost the most to
 * wait for, and nothing to give up), then the newest ready ones, so the longest-warm stay.
 * Pods being deleted count for neither.
 */
export function planWarmPool(size: number, pods: readonly PoolPodView[], maxCreates = MAX_CREATES_PER_PASS): PoolPlan {
  const live = pods.filter((pod) => !pod.deleting && !ended(pod));
  const toDelete = pods.filter((pod) => !pod.deleting && ended(pod)).map((pod) => pod.name);
  if (live.length < size) return { create: Math.min(size - live.length, maxCreates), delete: toDelete };
  const excess = live.length - size;
  const byDeletionOrder = [...live].sort(
    (a, b) => Number(a.ready) - Number(b.ready) || b.createdAt.localeCompare(a.createdAt) || b.name.localeCompare(a.name),
  );
  return { create: 0, delete: [...toDelete, ...byDeletionOrder.slice(0, excess).map((pod) => pod.name)] };
}

/**
 * The pods a run tries to claim, best first: ready, not being deleted, oldest first (a
 * pod's creation decides, its name breaks ties so two deciders agree). Several claimers
 * may pick the same first pod; the claim itself (warm-pool.ts claimPatch) lets one win,
 * and the others try the next.
 */
export function claimOrder(pods: readonly PoolPodView[]): string[] {
  return pods
    .filter((pod) => pod.ready && !pod.deleting && pod.phase === 'Running')
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.name.localeCompare(b.name))
    .map((pod) => pod.name);
}
