// A run as large as the API server takes at create, on a real API server and etcd: etcd keeps
// objects under 1.5 MiB, so a run created just under that fails every write the operator makes
// (its finalizer, its status). Such a run got no phase and held its slot of maxActiveRuns until
// it was deleted: one namespace's padded runs left every other run Queued. Now a run over the
// 1 MiB a run may be is refused (Failed, InvalidSpec) before any other write, and one too large
// for even that gets a Warning Event and gives its slot up.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createNamespace, kubectl, kubectlJson } from '../support/cluster.ts';
import { startControllerOnlyOperator } from '../support/controller-only-operator.ts';
import { eventsOf } from '../support/namespaced-runs.ts';
import { type OperatorProcess, eventually } from '../support/operator-process.ts';

const NS = 'oversized-runs';

interface Run {
  metadata: { name: string; uid: string };
  status?: { phase?: string; reason?: string; message?: string };
}

/** A run whose spec.sandbox.env holds about `bytes` bytes. */
function paddedRun(name: string, bytes: number) {
  const entries = Math.ceil(bytes / 32_000);
  const per = Math.floor(bytes / entries);
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name, namespace: NS },
    spec: {
      task: 'Make the README greet the world',
      repository: { url: 'https://github.com/acme/hello.git' },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
      sandbox: { env: Array.from({ length: entries }, (_, i) => ({ name: `PAD_${i}`, value: 'x'.repeat(per) })) },
    },
  };
}

async function create(object: object): Promise<{ code: number; stderr: string }> {
  return kubectl(['create', '-f', '-'], { input: stringify(object) });
}

const getRun = (name: string) => kubectlJson<Run>(['get', 'crun', name, '-n', NS]);

let operator: OperatorProcess;

beforeAll(async () => {
  await createNamespace(NS, { restricted: true });
  await createNamespace(`${NS}-lease`);
  const script = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'script', namespace: NS },
    data: { 'script.json': '{"turns":[{"text":"done"}]}' },
  };
  expect((await create(script)).code).toBe(0);
  operator = startControllerOnlyOperator({
    namespaces: [NS],
    identity: 'op-oversized',
    // One slot: a run that held it would leave the next one Queued.
    env: { CHAMVI_MAX_ACTIVE_RUNS: '1' },
  });
  await operator.waitForLog('caches synced; reconciling');
}, 120_000);

afterAll(async () => {
  await operator?.kill();
});

describe('a run too large to store with a status', () => {
  it('is refused InvalidSpec when over 1 MiB, gives its slot up when too large for any write, and the next run is admitted', async () => {
    // Over the bound, with room to write: refused, saying what to shorten.
    expect((await create(paddedRun('big', 1_200_000))).code).toBe(0);
    const big = await eventually(async () => ((await getRun('big')).status?.phase ? getRun('big') : undefined), 30_000, 'big refused');
    expect(big.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(big.status!.message).toMatch(/over the 1024 KiB a run may be.*shorten spec\.sandbox\.env/);

    // As large as the API server takes at create, to within 200 bytes: found by trying (a refused
    // create stores nothing), so that even the refusal's short status does not fit beside it.
    let size = 1_575_000;
    while ((await create(paddedRun('probe', size))).code !== 0) size -= 4_000;
    await kubectl(['delete', 'crun', 'probe', '-n', NS, '--wait=false']);
    while ((await create(paddedRun('edge', size + 200))).code === 0) {
      await kubectl(['delete', 'crun', 'edge', '-n', NS, '--wait=true']);
      size += 200;
    }
    const created = await create(paddedRun('edge', size));
    expect(created.code, created.stderr).toBe(0);
    const edge = await getRun('edge');
    await eventually(
      async () => (await eventsOf(NS, `involvedObject.uid=${edge.metadata.uid},type=Warning`, 'jsonpath={.items[*].message}')) || undefined,
      30_000,
      'a Warning Event on the run no write can be stored for',
    ).then((messages) => expect(messages).toMatch(/refuses every write to this run.*Delete it and create it smaller/));

    // The one slot is free: a run created now is admitted.
    expect((await create(paddedRun('next', 100))).code).toBe(0);
    // Admitted: Provisioning, then Running (this operator runs no workers, so it stays there).
    const admitted = new Set(['Provisioning', 'Running']);
    await eventually(async () => (admitted.has((await getRun('next')).status?.phase ?? '') ? true : undefined), 30_000, 'next admitted');
    expect((await getRun('edge')).status?.phase).toBeUndefined();
  }, 180_000);
});
