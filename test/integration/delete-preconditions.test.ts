// The gateways' deletes name the object meant by its uid (DeleteOptions preconditions), and the
// real API server answers a delete naming another object with 409 Conflict, deleting nothing:
// a run (or pod) deleted and created again under its name since the operator looked is left
// alone. goneUnlessSame takes that 409 as the object meant being gone. The reconcilers' side is
// in test/unit/delete-preconditions.test.ts.
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  NetworkingV1Api,
  type V1ConfigMap,
  type V1NetworkPolicy,
  type V1Pod,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { isConflict } from '../../operator/src/kube/api-errors.ts';
import { createKubeGateway, goneUnlessSame } from '../../operator/src/kube/kube-gateway.ts';
import { createScheduleGateway } from '../../operator/src/kube/schedule-gateway.ts';
import { createNamespace, deleteNamespace, kubeconfigPath } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';

const namespace = `delete-preconditions-${process.pid}`;
let kubeConfig: KubeConfig;

const runPath = (name: string) => ({ group: 'chamvi.dev', version: 'v1alpha1', plural: 'codingruns', namespace, name });

/** Creates the run `name` (no operator acts on it here, so no finalizer holds it) and answers its uid. */
async function createRun(name: string): Promise<string> {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const body = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name, namespace },
    spec: {
      task: 'Say hello',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'scripted', scriptRef: { name: 's' } },
    },
  };
  const run = (await custom.createNamespacedCustomObject({ ...runPath(name), body })) as CodingRun;
  return run.metadata.uid;
}

async function runUid(name: string): Promise<string | undefined> {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const run = (await custom.getNamespacedCustomObject(runPath(name)).catch(() => undefined)) as CodingRun | undefined;
  return run?.metadata.uid;
}

/** The run `name` deleted and created again: the old uid and the new one. */
async function runMadeAgain(name: string): Promise<{ old: string; current: string }> {
  const old = await createRun(name);
  await kubeConfig.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject(runPath(name));
  return { old, current: await createRun(name) };
}

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  await createNamespace(namespace);
}, 60_000);

afterAll(async () => {
  await deleteNamespace(namespace);
});

describe.each([
  ['the run gateway', () => createKubeGateway(kubeConfig).deleteRun],
  ['the schedule gateway', () => createScheduleGateway(kubeConfig).deleteRun],
])('%s deletes a run by its uid', (gatewayName, deleteRunOf) => {
  const name = gatewayName === 'the run gateway' ? 'ttl-run' : 'scheduled-run';

  it('is answered 409 for a run created again under the name, which stays', async () => {
    const deleteRun = deleteRunOf();
    const { old, current } = await runMadeAgain(name);
    const refused = await deleteRun(namespace, name, old).catch((error: unknown) => error);
    expect(isConflict(refused)).toBe(true);
    expect(await runUid(name)).toBe(current);
    // What the reconcilers do with it: the run meant is gone, and nothing fails.
    await expect(goneUnlessSame(deleteRun(namespace, name, old))).resolves.toBeUndefined();
    expect(await runUid(name)).toBe(current);
  });

  it('deletes the run of that uid, and a run gone already is no error', async () => {
    const deleteRun = deleteRunOf();
    const current = (await runUid(name)) ?? (await createRun(name));
    await deleteRun(namespace, name, current);
    expect(await runUid(name)).toBeUndefined();
    await expect(deleteRun(namespace, name, current)).resolves.toBeUndefined();
  });
});

describe('the run gateway deletes a pod by its uid', () => {
  const core = () => kubeConfig.makeApiClient(CoreV1Api);
  const pod: V1Pod = { metadata: { name: 'sandbox-again', namespace }, spec: { containers: [{ name: 'sandbox', image: 'busybox' }] } };
  const podUid = async () =>
    (
      await core()
        .readNamespacedPod({ namespace, name: 'sandbox-again' })
        .catch(() => undefined)
    )?.metadata;

  it('is answered 409 for a pod created again under the name, which stays; its own uid deletes it', async () => {
    const kube = createKubeGateway(kubeConfig);
    const old = (await core().createNamespacedPod({ namespace, body: pod })).metadata!.uid!;
    await core().deleteNamespacedPod({ namespace, name: 'sandbox-again', gracePeriodSeconds: 0 });
    await eventually(async () => ((await podUid()) ? undefined : true), 30_000, 'the first pod to go');
    const current = (await core().createNamespacedPod({ namespace, body: pod })).metadata!.uid!;

    const refused = await kube.deletePod(namespace, 'sandbox-again', old).catch((error: unknown) => error);
    expect(isConflict(refused)).toBe(true);
    expect(await podUid()).toMatchObject({ uid: current });
    expect((await podUid())?.deletionTimestamp).toBeUndefined();

    await kube.deletePod(namespace, 'sandbox-again', current);
    await eventually(async () => ((await podUid()) ? undefined : true), 30_000, 'the second pod to go');
  });
});

describe("the run gateway deletes a run's ConfigMap by its uid", () => {
  const core = () => kubeConfig.makeApiClient(CoreV1Api);
  const configMap: V1ConfigMap = { metadata: { name: 'fix-diff-again', namespace }, data: { diff: '' } };
  const held = async () =>
    (
      await core()
        .readNamespacedConfigMap({ namespace, name: 'fix-diff-again' })
        .catch(() => undefined)
    )?.metadata?.uid;

  it('is answered 409 for a ConfigMap created again under the name (without the run as owner), which stays; its own uid deletes it', async () => {
    const kube = createKubeGateway(kubeConfig);
    const old = (await core().createNamespacedConfigMap({ namespace, body: configMap })).metadata!.uid!;
    await core().deleteNamespacedConfigMap({ namespace, name: 'fix-diff-again' });
    const current = (await core().createNamespacedConfigMap({ namespace, body: configMap })).metadata!.uid!;

    const refused = await kube.deleteConfigMap(namespace, 'fix-diff-again', old).catch((error: unknown) => error);
    expect(isConflict(refused)).toBe(true);
    expect(await held()).toBe(current);
    // What the run reconciler does with it: the one meant is gone, and nothing fails.
    await expect(goneUnlessSame(kube.deleteConfigMap(namespace, 'fix-diff-again', old))).resolves.toBeUndefined();
    expect(await held()).toBe(current);

    await kube.deleteConfigMap(namespace, 'fix-diff-again', current);
    expect(await held()).toBeUndefined();
    await expect(kube.deleteConfigMap(namespace, 'fix-diff-again', current)).resolves.toBeUndefined();
  });
});

describe("the run gateway deletes a run's NetworkPolicy by its uid", () => {
  const networking = () => kubeConfig.makeApiClient(NetworkingV1Api);
  const policy: V1NetworkPolicy = {
    metadata: { name: 'fix-sandbox-again', namespace },
    spec: { podSelector: {}, policyTypes: ['Ingress', 'Egress'] },
  };
  const held = async () =>
    (
      await networking()
        .readNamespacedNetworkPolicy({ namespace, name: 'fix-sandbox-again' })
        .catch(() => undefined)
    )?.metadata?.uid;

  it('is answered 409 for a policy created again under the name (without the run as owner), which stays; its own uid deletes it', async () => {
    const kube = createKubeGateway(kubeConfig);
    const old = (await networking().createNamespacedNetworkPolicy({ namespace, body: policy })).metadata!.uid!;
    await networking().deleteNamespacedNetworkPolicy({ namespace, name: 'fix-sandbox-again' });
    const current = (await networking().createNamespacedNetworkPolicy({ namespace, body: policy })).metadata!.uid!;

    const refused = await kube.deleteNetworkPolicy(namespace, 'fix-sandbox-again', old).catch((error: unknown) => error);
    expect(isConflict(refused)).toBe(true);
    expect(await held()).toBe(current);
    // What the run reconciler does with it: the one meant is gone, and nothing fails.
    await expect(goneUnlessSame(kube.deleteNetworkPolicy(namespace, 'fix-sandbox-again', old))).resolves.toBeUndefined();
    expect(await held()).toBe(current);

    await kube.deleteNetworkPolicy(namespace, 'fix-sandbox-again', current);
    expect(await held()).toBeUndefined();
    await expect(kube.deleteNetworkPolicy(namespace, 'fix-sandbox-again', current)).resolves.toBeUndefined();
  });
});
