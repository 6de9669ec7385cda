// The workers' bounded-staleness reads (kube/recent-runs.ts): a run the API server returned
// a moment ago serves the next job's read, but never once it is older than the bound, and
// never when this process's run cache shows a newer spec or a deletion: a budget lowered or
// a tool put under approval must reach the next step, however recent the remembered run is.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { RecentRuns, rememberingRuns } from '../../operator/src/kube/recent-runs.ts';
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

function setup(server: CodingRun) {
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

  it('reads fresh when the run cache shows a newer spec than the one remembered', async () => {
    const t = setup(run(2, 3));
    t.recent.learned(run(1, 10));
    t.cache(run(2, 3));
    expect(maxStepsOf(await t.recent.read('ns', 'r'))).toBe(3);
    expect(t.gets()).toBe(1);
  });

  it('reads fresh when the run cache shows the run being deleted', async () => {
    const deleting = run(1, 10, { deletionTimestamp: '2026-01-01T00:00:00Z' } as Partial<CodingRun['metadata']>);
    const t = setup(deleting);
    t.recent.learned(run(1, 10));
    t.cache(deleting);
    expect((await t.recent.read('ns', 'r'))?.metadata.deletionTimestamp).toBeDefined();
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
