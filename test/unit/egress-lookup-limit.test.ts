// The bounds on the egress proxy's name lookups in flight (lookup-limit.ts): per run, per
// namespace, derived from the thread pool getaddrinfo runs on.
import { describe, expect, it } from 'vitest';
import { LOOKUPS_PER_RUN, LookupLimit, libuvThreadPoolSize, lookupsPerNamespace } from '../../operator/src/egress/lookup-limit.ts';

describe('libuvThreadPoolSize', () => {
  it.each([
    ['unset', undefined, 4],
    ['the chart’s 64', '64', 64],
    ['0, which libuv takes as 1', '0', 1],
    ['not a number', 'many', 1],
    ['beyond libuv’s most', '5000', 1024],
  ])('%s', (_why, value, threads) => {
    expect(libuvThreadPoolSize(value === undefined ? {} : { UV_THREADPOOL_SIZE: value })).toBe(threads);
  });
});

describe('lookupsPerNamespace', () => {
  it.each([
    [64, 16],
    [128, 32],
    [4, LOOKUPS_PER_RUN],
    [1, LOOKUPS_PER_RUN],
  ])('a pool of %i threads gives a namespace %i', (threads, share) => {
    expect(lookupsPerNamespace(threads)).toBe(share);
  });
});

describe('LookupLimit', () => {
  /** A lookup that runs until `finish` is called; `started` says whether it began. */
  function pending(limit: LookupLimit, run: { uid: string; namespace: string }) {
    let finish = () => undefined as void;
    const state = { started: false };
    const done = limit.run(run, () => {
      state.started = true;
      return new Promise<void>((resolve) => (finish = resolve));
    });
    return { state, done, finish: () => finish() };
  }
  const flush = () => new Promise((resolve) => setImmediate(resolve));

  it('runs at most perNamespace lookups of one namespace, its runs together, and lets another namespace start at once', async () => {
    const limit = new LookupLimit({ perRun: 2, perNamespace: 3 });
    const a = [0, 1, 2, 3].map((i) => pending(limit, { uid: `a${i}`, namespace: 'a' }));
    await flush();
    expect(a.map((lookup) => lookup.state.started)).toEqual([true, true, true, false]);
    const b = pending(limit, { uid: 'b0', namespace: 'b' });
    await flush();
    expect(b.state.started).toBe(true);
    // One of a's ends: the waiting one takes its place.
    a[0]!.finish();
    await flush();
    expect(a[3]!.state.started).toBe(true);
  });

  it('runs at most perRun lookups of one run, leaving the namespace’s other places to its other runs', async () => {
    const limit = new LookupLimit({ perRun: 2, perNamespace: 3 });
    const same = [0, 1, 2].map(() => pending(limit, { uid: 'r', namespace: 'a' }));
    const other = pending(limit, { uid: 's', namespace: 'a' });
    await flush();
    expect(same.map((lookup) => lookup.state.started)).toEqual([true, true, false]);
    expect(other.state.started).toBe(true);
  });
});
