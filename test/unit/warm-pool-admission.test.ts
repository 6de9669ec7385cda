// What the pool loop reads in a create's answer: whether admission changed the pool's pod, and
// what it tells the admin about it.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { admissionChangedMessage, admissionChanges } from '../../operator/src/reconcile/warm-pool-admission.ts';
import { POOL_ISOLATION_LABEL, poolTemplateRun, warmPoolPod, type WarmPoolConfig } from '../../operator/src/reconcile/warm-pool.ts';

const pool: WarmPoolConfig = { name: 'pool', namespace: 'team', size: 2 };
const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], warmPools: [pool] }, {});

/** The pool's pod as the API server answers its create: a name, a uid, generation 1. */
function admitted(change: (pod: V1Pod) => V1Pod = (pod) => pod): V1Pod {
  const built = warmPoolPod(pool, config, poolTemplateRun());
  return change({ ...built, metadata: { ...built.metadata, name: 'pool-warm-abc', uid: 'uid-1', generation: 1 } });
}

const withContainer = (pod: V1Pod, name: string): V1Pod => ({
  ...pod,
  spec: { ...pod.spec!, containers: [...pod.spec!.containers, { name, image: `injector.example/${name}:1` }] },
});

describe('admissionChanges', () => {
  it.each<[string, (pod: V1Pod) => V1Pod, RegExp | undefined]>([
    ['the pod as made', (pod) => pod, undefined],
    [
      'scheduling gates and tolerations added (nothing that runs)',
      (pod) => ({ ...pod, spec: { ...pod.spec!, schedulingGates: [{ name: 'kueue' }], tolerations: [{ key: 'a', operator: 'Exists' }] } }),
      undefined,
    ],
    [
      'a deadline',
      (pod) => ({ ...pod, spec: { ...pod.spec!, activeDeadlineSeconds: 60 } }),
      /^\/spec\/activeDeadlineSeconds \(only a claim sets it\)$/,
    ],
    ['a sidecar', (pod) => withContainer(pod, 'istio-proxy'), /^container istio-proxy/],
    [
      "the deny-all's label taken off",
      (pod) => ({
        ...pod,
        metadata: { ...pod.metadata, labels: { ...pod.metadata!.labels, [POOL_ISOLATION_LABEL]: undefined as unknown as string } },
      }),
      /^label chamvi\.dev\/warm-pool-sandbox \(removed; the pool sets pool\)$/,
    ],
  ])('%s', (_case, change, first) => {
    const changes = admissionChanges(admitted(change), pool, config);
    if (first === undefined) expect(changes).toEqual([]);
    else expect(changes[0]).toMatch(first);
  });
});

describe('admissionChangedMessage', () => {
  it('names the first 8 changes and how many more, and says to exclude the pool pods by their label', () => {
    const sidecars = Array.from({ length: 10 }, (_, index) => `sidecar-${index}`);
    const changes = admissionChanges(
      admitted((pod) => sidecars.reduce(withContainer, pod)),
      pool,
      config,
    );
    const message = admissionChangedMessage(pool, changes);
    expect(message).toMatch(/^admission changed the warm pool pod: container sidecar-0 .* and 2 more\. /);
    expect(message).toContain('never handed to a run');
    expect(message).toContain('chamvi.dev/warm-pool-sandbox DoesNotExist');
    expect(message).not.toContain('eks.amazonaws.com/role-arn');
  });
});
