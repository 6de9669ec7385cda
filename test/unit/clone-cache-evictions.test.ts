// Which kept archives make room for a new one (workers/clone-cache.ts evictions): least
// recently used first, only as many as needed.
import { describe, expect, it } from 'vitest';
import { evictions, type CachedArchive } from '../../operator/src/workers/clone-cache.ts';

const archive = (key: string, bytes: number, lastUsed: number): CachedArchive => ({
  key,
  bytes,
  lastUsed,
  checkout: { bytes: 0, entries: 0 },
});

describe('evictions', () => {
  const kept = [archive('b', 300, 20), archive('a', 300, 10), archive('c', 300, 30)];
  it.each([
    ['room enough: none', 50, 1000, []],
    ['exactly full: none', 100, 1000, []],
    ['one more than fits: the least recently used', 200, 1000, ['a']],
    ['two to drop, oldest first', 500, 1000, ['a', 'b']],
    ['larger than all: every one', 1001, 1000, ['a', 'b', 'c']],
  ] as const)('%s', (_, incoming, maxBytes, expected) => {
    expect(evictions(kept, incoming, maxBytes)).toEqual(expected);
  });

  it('does not reorder what it was given', () => {
    expect(kept.map((a) => a.key)).toEqual(['b', 'a', 'c']);
  });
});
