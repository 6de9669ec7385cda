// status.admittedPod keeps, beside each container's admitted image, the digest a pod's init
// container was first reported to have run under the operator's repository (init-container-runs.ts
// ranImageKey): the API server must store that entry as written, or the status write that carries
// it would be refused, and every later one of the run with it.
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { createKubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { ranImageKey } from '../../operator/src/reconcile/init-container-runs.ts';
import { createNamespace, deleteNamespace, kubeconfigPath } from '../support/cluster.ts';

const namespace = `admitted-ran-${process.pid}`;
const runsPath = { group: 'chamvi.dev', version: 'v1alpha1', plural: 'codingruns', namespace };
let kubeConfig: KubeConfig;

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  await createNamespace(namespace, { restricted: true });
}, 60_000);

afterAll(async () => {
  await deleteNamespace(namespace);
});

it("stores the record of what an init container ran beside the pod's admitted images", async () => {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const run = (await custom.createNamespacedCustomObject({
    ...runsPath,
    body: {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'ran', namespace },
      spec: {
        task: 'Run.',
        repository: { url: 'https://github.com/acme/webapp.git' },
        model: { provider: 'scripted', scriptRef: { name: 's' } },
        sandbox: { image: 'acme/builder:2' },
      },
    },
  })) as CodingRun;
  const images = [
    { container: 'sandbox', image: 'acme/builder:2' },
    { container: 'chamvi-tools', image: 'ghcr.io/chamvi/chamvi-sandbox:0.1.0' },
    { container: ranImageKey('chamvi-tools'), image: `ghcr.io/chamvi/chamvi-sandbox@sha256:${'a'.repeat(64)}` },
  ];
  const status = { phase: 'Provisioning' as const, podName: 'ran-sandbox', admittedPod: { uid: 'pod-uid-1', images } };
  await createKubeGateway(kubeConfig).replaceRunStatus(run, status);
  const stored = (await custom.getNamespacedCustomObject({ ...runsPath, name: 'ran' })) as CodingRun;
  expect(stored.status?.admittedPod).toEqual({ uid: 'pod-uid-1', images });
});
