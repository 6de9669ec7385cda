// Which unwanted pool-labelled pods one pass of the pool loop deletes: a few per namespace, in
// turn across namespaces from where the last pass stopped, a few in all; the rest are left for
// the passes after.
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
      last: 'a',
    },
    {
      case: "takes at most perNamespace of one namespace's planted pods",
      pods: pods('c', 500),
      limits: { perNamespace: 3, perPass: 10 },
      now: ['c-0', 'c-1', 'c-2'],
      later: 497,
      last: 'c',
    },
    {
      case: 'takes namespaces in turn: a namespace after planted hundreds still gets its share',
      pods: [...pods('a', 500), ...pods('b', 2)],
      limits: { perNamespace: 3, perPass: 10 },
      now: ['a-0', 'b-0', 'a-1', 'b-1', 'a-2'],
      later: 497,
      last: 'a',
    },
    {
      case: 'takes namespaces in name order, not in the order they are listed',
      pods: [...pods('c', 1), ...pods('a', 1), ...pods('b', 1)],
      limits: { perNamespace: 3, perPass: 10 },
      now: ['a-0', 'b-0', 'c-0'],
      later: [],
      last: 'c',
    },
    {
      case: 'takes at most perPass over all namespaces, one of each first',
      pods: [...pods('a', 5), ...pods('b', 5), ...pods('c', 5)],
      limits: { perNamespace: 3, perPass: 4 },
      now: ['a-0', 'b-0', 'c-0', 'a-1'],
      later: 11,
      last: 'a',
    },
    {
      case: 'starts with the namespace after the one the last pass took last',
      pods: [...pods('a', 5), ...pods('b', 5), ...pods('c', 5)],
      limits: { perNamespace: 3, perPass: 4 },
      startAfter: 'a',
      now: ['b-0', 'c-0', 'a-0', 'b-1'],
      later: 11,
      last: 'b',
    },
    {
      case: 'starts with the next namespace in name order when the last one has no pod left',
      pods: [...pods('a', 1), ...pods('c', 1)],
      limits: { perNamespace: 3, perPass: 1 },
      startAfter: 'b',
      now: ['c-0'],
      later: ['a-0'],
      last: 'c',
    },
    {
      case: 'starts over at the first namespace after the last one',
      pods: [...pods('a', 1), ...pods('b', 1)],
      limits: { perNamespace: 3, perPass: 1 },
      startAfter: 'b',
      now: ['a-0'],
      later: ['b-0'],
      last: 'a',
    },
    {
      case: 'takes nothing from nothing, and keeps where it stopped',
      pods: [],
      limits: { perNamespace: 3, perPass: 4 },
      startAfter: 'b',
      now: [],
      later: [],
      last: 'b',
    },
  ])('$case', ({ pods: candidates, limits, startAfter, now, later, last }) => {
    const picked = pickUnwantedDeletes(candidates, limits, startAfter);
    expect(names(picked.now)).toEqual(now);
    expect(picked.lastNamespace).toBe(last);
    if (typeof later === 'number') expect(picked.later).toHaveLength(later);
    else expect(names(picked.later)).toEqual(later);
    // Every pod is either deleted now or left for later, once.
    expect(new Set([...picked.now, ...picked.later]).size).toBe(candidates.length);
  });

  it('reaches, in the next pass, the namespaces after those whose pods are planted again as fast as they are deleted', () => {
    const limits = { perNamespace: 10, perPass: 40 };
    const namespaces = Array.from({ length: 50 }, (_, index) => `ns-${String(index).padStart(2, '0')}`);
    const first = pickUnwantedDeletes(
      namespaces.map((namespace) => ({ namespace, name: `${namespace}-first` })),
      limits,
    );
    expect(first.now.map((pod) => pod.namespace)).toEqual(namespaces.slice(0, 40));
    // The first 40 namespaces' pods are planted again, each under a new name; the other ten wait.
    const second = pickUnwantedDeletes(
      [...namespaces.slice(0, 40).map((namespace) => ({ namespace, name: `${namespace}-again` })), ...first.later],
      limits,
      first.lastNamespace,
    );
    expect(second.now.map((pod) => pod.namespace)).toEqual([...namespaces.slice(40), ...namespaces.slice(0, 30)]);
  });
});
