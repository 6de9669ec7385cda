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
  /** Pods to delete now: ended or stuck ones, then the excess of a pool sized down. */
  delete: string[];
  /** Of those, the pods that ended or stuck before they were ready: failed starts, which the loop backs off from. */
  failedStarts: number;
}

/** When a pool pod not ready yet counts as stuck (an image that cannot be pulled, a node that never takes it). */
export interface PoolClock {
  now: number;
  /** The operator's sandboxReadyTimeoutSeconds, in ms: a pod not ready this long after its creation is replaced. */
  readyTimeoutMs: number;
}

/** How long a pool waits before it creates again after `failures` failed starts in a row: 2 s, doubling, at most 5 min. */
export function failedStartBackoffMs(failures: number): number {
  return failures <= 0 ? 0 : Math.min(2_000 * 2 ** Math.min(failures - 1, 20), 300_000);
}

/** Pods the pool creates in one pass at most: a pool sized up by hundreds must not stall the API server. */
export const MAX_CREATES_PER_PASS = 20;

const ended = (pod: PoolPodView) => pod.phase === 'Failed' || pod.phase === 'Succeeded';
/** Not ready within the timeout of its creation: it holds a place in the pool and will never serve a run. */
const stuck = (pod: PoolPodView, clock: PoolClock | undefined) =>
  clock !== undefined && !pod.ready && pod.createdAt !== '' && clock.now - Date.parse(pod.createdAt) > clock.readyTimeoutMs;

/**
 * Keep `size` unclaimed pods that are starting or ready. Pods that ended, or are stuck short
 * of ready past the clock's timeout (ImagePullBackOff counted as starting for ever), are
 * replaced; a pool above its size deletes first the pods that are not ready yet (they cost
 * the most to wait for, and nothing to give up), then the newest ready ones, so the
 * longest-warm stay. Pods being deleted count for neither.
 */
export function planWarmPool(size: number, pods: readonly PoolPodView[], maxCreates = MAX_CREATES_PER_PASS, clock?: PoolClock): PoolPlan {
  const gone = (pod: PoolPodView) => ended(pod) || stuck(pod, clock);
  const live = pods.filter((pod) => !pod.deleting && !gone(pod));
  const replaced = pods.filter((pod) => !pod.deleting && gone(pod));
  const toDelete = replaced.map((pod) => pod.name);
  const failedStarts = replaced.filter((pod) => !pod.ready).length;
  if (live.length < size) return { create: Math.min(size - live.length, maxCreates), delete: toDelete, failedStarts };
  const excess = live.length - size;
  const byDeletionOrder = [...live].sort(
    (a, b) => Number(a.ready) - Number(b.ready) || b.createdAt.localeCompare(a.createdAt) || b.name.localeCompare(a.name),
  );
  return { create: 0, delete: [...toDelete, ...byDeletionOrder.slice(0, excess).map((pod) => pod.name)], failedStarts };
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
