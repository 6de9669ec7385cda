// The workers' bounded-staleness reads (kube/recent-runs.ts): the leader's run cache serves a
// job's read once it has caught up with the last copy of the run this process saw; else a run
// the API server returned a moment ago does, but never once it is older than the bound, and
// never when the run cache shows a newer spec or a deletion: a budget lowered or a tool put
// under approval must reach the next step, however recent the remembered run is.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { isAtLeastVersion, RecentRuns, rememberingRuns } from '../../operator/src/kube/recent-runs.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';

function run(generation: number, maxSteps: number, extra: Partial<CodingRun['metadata']> = {}): CodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: 'r', namespace: 'ns', uid: 'u1', generation, resourceVersion: String(generation * 10), ...extra },
    spec: { budget: { maxSteps } },
    status: { phase: 'Running' },
  } as unknown as CodingRun;
}

function setup(server: CodingRun, seenMaxAgeMs = 600_000) {
  let clock = 0;
  let gets = 0;
  let cached: CodingRun | undefined;
  const state = { server };
  const recent = new RecentRuns(
    async () => {
      gets++;
      return structuredClone(state.server);
    },
    () => ({ get: () => cached }),
    2_000,
    () => clock,
    seenMaxAgeMs,
  );
  return {
    recent,
    state,
    gets: () => gets,
    advance: (ms: number) => (clock += ms),
    cache: (value: CodingRun | undefined) => (cached = value),
  };
}

const maxStepsOf = (value: CodingRun | undefined) => (value?.spec as { budget: { maxSteps: number } }).budget.maxSteps;

describe('RecentRuns', () => {
  it('serves a run the API server returned within the bound without a GET', async () => {
    const t = setup(run(1, 10));
    t.recent.learned(run(1, 10));
    t.advance(1_999);
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(10);
    expect(t.gets()).toBe(0);
  });

  it('reads fresh once the remembered run is older than the bound', async () => {
    const t = setup(run(2, 3));
    t.recent.learned(run(1, 10));
    t.advance(2_001);
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(3);
    expect(t.gets()).toBe(1);
  });

  it('serves a newer spec or a deletion from the run cache at once, without a GET', async () => {
    const t = setup(run(2, 3));
    t.recent.learned(run(1, 10));
    t.cache(run(2, 3));
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(3);
    const deleting = run(3, 3, { deletionTimestamp: '2026-01-01T00:00:00Z' } as Partial<CodingRun['metadata']>);
    t.cache(deleting);
    expect((await t.recent.read('ns', 'r'))?.metadata.deletionTimestamp).toBeDefined();
    expect(t.gets()).toBe(0);
  });

  it('serves the run cache long after the remembered run is too old, once the cache has what this process last saw', async () => {
    const t = setup(run(1, 10));
    t.recent.learned(run(1, 10));
    t.cache(run(1, 10));
    t.advance(60_000);
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(10);
    expect(t.gets()).toBe(0);
  });

  it('reads fresh when the run cache is behind the last copy this process saw (its watch may be dead)', async () => {
    const t = setup(run(3, 4));
    t.cache(run(1, 10));
    t.recent.learned(run(2, 5));
    t.advance(2_001);
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(4);
    expect(t.gets()).toBe(1);
  });

  it("serves a write's answer the watch has not delivered yet, not the older cached copy", async () => {
    const t = setup(run(3, 4));
    t.cache(run(1, 10));
    t.recent.learned(run(2, 5));
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(5);
    expect(t.gets()).toBe(0);
  });

  it('does not take the cache for a run this process never saw, nor once what it saw is forgotten or gone', async () => {
    const never = setup(run(2, 3));
    never.cache(run(1, 10));
    expect(maxStepsOf(await never.recent.read('ns', 'r'))).toBe(3);
    expect(never.gets()).toBe(1);

    const forgotten = setup(run(2, 3), 60_000);
    forgotten.recent.learned(run(1, 10));
    forgotten.cache(run(1, 10));
    forgotten.advance(60_001);
    expect(maxStepsOf(await forgotten.recent.read('ns', 'r'))).toBe(3);
    expect(forgotten.gets()).toBe(1);

    const gone = setup(undefined as unknown as CodingRun);
    gone.recent.learned(run(1, 10));
    expect(await gone.recent.readFresh('ns', 'r')).toBeUndefined();
    gone.cache(run(1, 10));
    expect(await gone.recent.read('ns', 'r')).toBeUndefined();
    expect(gone.gets()).toBe(2);
  });

  it('checks the cache against the newest version seen, whatever order the answers came in', async () => {
    const t = setup(run(4, 1));
    t.recent.learned(run(3, 2));
    t.recent.learned(run(1, 10));
    t.advance(2_001);
    t.cache(run(2, 5));
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(1);
    expect(t.gets()).toBe(1);
  });

  it('ignores a cached run of another uid (the name was reused) and an equal cached generation', async () => {
    const t = setup(run(5, 1));
    t.recent.learned(run(1, 10));
    t.cache(run(1, 10));
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(10);
    t.cache(run(9, 1, { uid: 'other' }));
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(10);
    expect(t.gets()).toBe(0);
  });

  it('hands out copies: a caller changing what it read changes nothing remembered', async () => {
    const t = setup(run(1, 10));
    t.recent.learned(run(1, 10));
    const first = await t.recent.read('ns', 'r');
    first!.status!.phase = 'Succeeded';
    expect((await t.recent.read('ns', 'r'))?.status?.phase).toBe('Running');
  });

  it('readHeld serves the cache or a remembered copy as read does, and nothing, without a GET, where read would GET', async () => {
    const t = setup(run(3, 4));
    t.recent.learned(run(1, 10));
    expect(maxStepsOf(t.recent.readHeld('ns', 'r'))).toBe(10);
    t.advance(2_001);
    // A replica that is not the leader, past the bound: read would GET; readHeld holds nothing.
    expect(t.recent.readHeld('ns', 'r')).toBeUndefined();
    expect(t.gets()).toBe(0);
    // The leader's cache, caught up with what this process saw, serves it long after.
    t.cache(run(1, 10));
    t.advance(60_000);
    expect(maxStepsOf(t.recent.readHeld('ns', 'r'))).toBe(10);
    // A cache behind what this process saw (its watch may be dead) is not held either.
    t.recent.learned(run(2, 5));
    t.advance(2_001);
    expect(t.recent.readHeld('ns', 'r')).toBeUndefined();
    expect(t.recent.readHeld('ns', 'other')).toBeUndefined();
    expect(t.gets()).toBe(0);
  });

  it('remembers what the gateway returns from writes, and makes getRun a GET', async () => {
    const t = setup(run(3, 7));
    const written = run(2, 5);
    const kube = {
      getRun: async () => run(3, 7),
      patchRunStatus: async () => written,
      replaceRunStatus: async () => written,
      setRunFinalizers: async () => written,
    } as unknown as KubeGateway;
    const remembering = rememberingRuns(kube, t.recent);
    await remembering.patchRunStatus('ns', 'r', []);
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(5);
    expect(t.gets()).toBe(0);
    // getRun through the gateway is a GET (the reconciler's conflict path needs fresh), and remembered.
    t.state.server = run(3, 7);
    expect(maxStepsOf(await remembering.getRun('ns', 'r'))).toBe(7);
    expect(t.gets()).toBe(1);
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(7);
    expect(t.gets()).toBe(1);
  });
});

describe('isAtLeastVersion', () => {
  it.each([
    ['10', '9', true],
    ['9', '10', false],
    ['12345678901234567890', '12345678901234567889', true],
    ['7', '7', true],
    ['07', '7', false],
    ['abc', 'abc', true],
    ['abd', 'abc', false],
    [undefined, '1', false],
  ] as const)('%s against %s: %s', (version, than, expected) => {
    expect(isAtLeastVersion(version, than)).toBe(expected);
  });
});
