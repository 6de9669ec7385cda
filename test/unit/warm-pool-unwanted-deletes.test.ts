// Which unwanted pool-labelled pods one pass of the pool loop deletes: a few per namespace, in
// turn across namespaces, a few in all; the rest are left for the passes after.
import { describe, expect, it } from 'vitest';
import { pickUnwantedDeletes } from '../../operator/src/reconcile/warm-pool-unwanted-deletes.ts';

const pods = (namespace: string, count: number) =>
  Array.from({ length: count }, (_, index) => ({ namespace, name: `${namespace}-${index}` }));
const names = (picked: readonly { name: string }[]) => picked.map((pod) => pod.name);

describe('pickUnwantedDeletes', () => {
  it.each([
    {
      case: 'takes all when under both limits',
      pods: [...pods('a', 2), ...pods('b', 1)],
      limits: { perNamespace: 3, perPass: 10 },
      now: ['a-0', 'b-0', 'a-1'],
      later: [],
    },
    {
      case: "takes at most perNamespace of one namespace's planted pods",
      pods: pods('c', 500),
      limits: { perNamespace: 3, perPass: 10 },
      now: ['c-0', 'c-1', 'c-2'],
      later: 497,
    },
    {
      case: 'takes namespaces in turn: a namespace listed after planted hundreds still gets its share',
      pods: [...pods('c', 500), ...pods('a', 2)],
      limits: { perNamespace: 3, perPass: 10 },
      now: ['c-0', 'a-0', 'c-1', 'a-1', 'c-2'],
      later: 497,
    },
    {
      case: 'takes at most perPass over all namespaces, one of each first',
      pods: [...pods('a', 5), ...pods('b', 5), ...pods('c', 5)],
      limits: { perNamespace: 3, perPass: 4 },
      now: ['a-0', 'b-0', 'c-0', 'a-1'],
      later: 11,
    },
    { case: 'takes nothing from nothing', pods: [], limits: { perNamespace: 3, perPass: 4 }, now: [], later: [] },
  ])('$case', ({ pods: candidates, limits, now, later }) => {
    const picked = pickUnwantedDeletes(candidates, limits);
    expect(names(picked.now)).toEqual(now);
    if (typeof later === 'number') expect(picked.later).toHaveLength(later);
    else expect(names(picked.later)).toEqual(later);
    // Every pod is either deleted now or left for later, once.
    expect(new Set([...picked.now, ...picked.later]).size).toBe(candidates.length);
  });
});
