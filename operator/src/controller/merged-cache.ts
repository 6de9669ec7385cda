// One cache over several informers (one per watched namespace): a get asks each in turn, a
// list joins them.
import type { CachedObject, Informer } from './informer.ts';
import type { ObjectCache } from './run-reconciler.ts';

export class MergedCache<T extends CachedObject> implements ObjectCache<T> {
  constructor(private readonly informers: Informer<T>[]) {}
  get(namespace: string, name: string): T | undefined {
    for (const informer of this.informers) {
      const found = informer.get(namespace, name);
      if (found) return found;
    }
    return undefined;
  }
  list(): T[] {
    return this.informers.flatMap((informer) => informer.list());
  }
}
