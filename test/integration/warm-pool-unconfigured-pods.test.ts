// The pods of a warm pool taken out of the config are deleted by the next leader, against the
// real API server and kwok with the operator as a real process: an operator started with
// `warmPools: []` finds an idle pod of the old pool, Ready and changing no more, and deletes it.
// Its pod watch's pokes came during the informer's first list, before the namespace counted as
// listed, and the loop had no pass of its own without pools: the pod stayed for good.
import { afterAll, beforeAll, describe, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { poolTemplateRun, warmPoolPod, type WarmPoolConfig } from '../../operator/src/reconcile/warm-pool.ts';
import { createNamespace, deleteNamespace, kubectlCreate, kubectlJson } from '../support/cluster.ts';
import { startControllerOnlyOperator } from '../support/controller-only-operator.ts';
import { type OperatorProcess, eventually } from '../support/operator-process.ts';

const namespace = `warm-gone-${process.pid}`;
const oldPool: WarmPoolConfig = { name: 'gone', namespace, size: 1 };
const oldConfig = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], warmPools: [oldPool] }, {});

interface PodList {
  items: Array<{
    metadata: { name: string; deletionTimestamp?: string };
    status?: { conditions?: Array<{ type: string; status: string }> };
  }>;
}

const poolPods = () => kubectlJson<PodList>(['get', 'pods', '-n', namespace, '-l', `chamvi.dev/warm-pool=${oldPool.name}`]);

describe('an operator started with no warm pools', () => {
  let operator: OperatorProcess | undefined;

  beforeAll(async () => {
    await createNamespace(namespace, { restricted: true });
    await createNamespace(`${namespace}-lease`);
    // The old pool's pod, as its leader made it, Ready before the new operator starts.
    const pod = warmPoolPod(oldPool, oldConfig, poolTemplateRun());
    await kubectlCreate({ ...pod, metadata: { ...pod.metadata, generateName: undefined, name: 'gone-warm-left' } });
    await eventually(
      async () =>
        (await poolPods()).items[0]?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? true : undefined,
      30_000,
      "the old pool's pod to be Ready",
    );
  }, 120_000);

  afterAll(async () => {
    await operator?.kill();
    await deleteNamespace(namespace);
    await deleteNamespace(`${namespace}-lease`);
  });

  it('deletes the idle pod of a pool no longer configured', async () => {
    operator = startControllerOnlyOperator({ namespaces: [namespace], identity: 'op-warm-gone' });
    await operator.waitForLog('caches synced; reconciling');
    await eventually(
      async () => ((await poolPods()).items.every((pod) => pod.metadata.deletionTimestamp !== undefined) ? true : undefined),
      20_000,
      "the old pool's pod to be deleted",
    );
    await operator.waitForLog('deleted pods of a pool no longer configured', 1_000);
  });
});
