// The exec transport's owner check (security #11.14) as the starts share it: starts made while
// one read of the pod is in flight wait for that read rather than each making one, and every
// start made after it settled reads again. The pod reader is injected and the kubeconfig names
// no cluster, so a start that passes the check fails just after it, at "no current cluster".
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { API_VERSION, KIND, RUN_UID_LABEL } from '../../operator/src/api/index.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../../operator/src/reconcile/ownership.ts';
import { KubernetesExecTransport } from '../../operator/src/sandbox/kubernetes-exec-transport.ts';

const RUN_UID = 'run-uid-1';
const PASSED = 'the kubeconfig has no current cluster';
const REFUSED = "is not the run's";

const pod = (controllerUid: string): V1Pod => ({
  metadata: {
    name: 'sandbox',
    namespace: 'team',
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [RUN_UID_LABEL]: RUN_UID },
    ownerReferences: [{ apiVersion: API_VERSION, kind: KIND, name: 'run', uid: controllerUid, controller: true }],
  },
});

/** A reader whose answers the test releases, counting the reads. */
function heldReader() {
  const pending: Array<(pod: V1Pod) => void> = [];
  return {
    reads: () => pending.length,
    read: () => new Promise<V1Pod>((resolve) => pending.push(resolve)),
    answer: (index: number, answer: V1Pod) => pending[index]!(answer),
  };
}

const transportWith = (reader: ReturnType<typeof heldReader>) =>
  new KubernetesExecTransport({
    kubeConfig: new KubeConfig(),
    namespace: 'team',
    podName: 'sandbox',
    container: 'sandbox',
    toolboxCommand: ['toolbox'],
    expectedOwnerUid: RUN_UID,
    readPod: reader.read,
  });

describe('the exec owner check (security #11.14)', () => {
  it('serves starts made while a read is in flight with that read, and reads again for a later start', async () => {
    const reader = heldReader();
    const transport = transportWith(reader);
    const first = transport.start(['serve']);
    const second = transport.start(['import']);
    expect(reader.reads()).toBe(1);
    reader.answer(0, pod(RUN_UID));
    await expect(first).rejects.toThrow(PASSED);
    await expect(second).rejects.toThrow(PASSED);

    // The pod has been replaced by one the run does not control: the next start reads it, and is refused.
    const third = transport.start(['serve']);
    expect(reader.reads()).toBe(2);
    reader.answer(1, pod('someone-else'));
    await expect(third).rejects.toThrow(REFUSED);
  });

  it('refuses every start that shared a read which found the pod not the run', async () => {
    const reader = heldReader();
    const transport = transportWith(reader);
    const starts = [transport.start(['serve']), transport.start(['import']), transport.start(['serve'])];
    expect(reader.reads()).toBe(1);
    reader.answer(0, pod('someone-else'));
    for (const start of starts) await expect(start).rejects.toThrow(REFUSED);
  });
});
