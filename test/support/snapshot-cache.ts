// A cache as the operator's informers keep one, for tests that drive the reconciler or the pool
// loop themselves: what the API server listed at the last refresh(), read as the informers'
// caches are (ObjectCache), so each pass of a test decides on what the server held just before.
import type { ObjectCache } from '../../operator/src/controller/run-reconciler.ts';

/** refresh(keep): only the items `keep` takes, as a watch that has not brought the others yet. */
export type SnapshotCache<T> = ObjectCache<T> & { refresh(keep?: (item: T) => boolean): Promise<void> };

export function snapshotCache<T extends { metadata?: { name?: string; namespace?: string } }>(
  list: () => Promise<{ items: T[] }>,
): SnapshotCache<T> {
  let items: T[] = [];
  return {
    async refresh(keep = () => true) {
      items = (await list()).items.filter(keep);
    },
    get: (ns: string, name: string) => items.find((item) => item.metadata?.namespace === ns && item.metadata?.name === name),
    list: () => items,
  };
}
