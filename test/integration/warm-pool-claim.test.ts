// A warm pool pod against the real API server and kwok: claims of one pod raced by many runs
// leave exactly one winner (the API server applies the claim patch's test and remove as one
// update), and a claimed pool pod is a sandbox like any other: it passes the one Sandbox
// contract, through an exec that checks the pod is the claiming run's.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CustomObjectsApi, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codingRunSpec, type CodingRun, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { kubernetesWarmPoolGateway, type WarmPoolGateway } from '../../operator/src/kube/warm-pool-gateway.ts';
import { RUN_UID_LABEL } from '../../operator/src/api/index.ts';
import { createKubernetesSandbox } from '../../operator/src/sandbox/kubernetes-sandbox.ts';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { SANDBOX_CONTAINER } from '../../operator/src/reconcile/sandbox-pod.ts';
import { WARM_POOL_LABEL, claimPatch, warmPoolPod, type WarmPoolConfig } from '../../operator/src/reconcile/warm-pool.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl } from '../support/cluster.ts';
import { describeSandboxContract } from '../support/sandbox-contract.ts';
import { SANDBOX_POD_SELECTOR, startSandboxExecRegistrar, type SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';

const namespace = `warm-claim-${process.pid}`;
const testLabel = 'chamvi.dev/test';
const pool: WarmPoolConfig = { name: 'pool', namespace, size: 1 };
const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'] }, {});

let kubeConfig: KubeConfig;
let gateway: WarmPoolGateway;
let registrar: SandboxExecRegistrar;
let rootDir: string;
let runCount = 0;

/** A CodingRun that exists (the garbage collector deletes a pod whose owner does not); no operator acts on it here. */
async function createRun(): Promise<ParsedCodingRun> {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const body = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: `claimer-${(runCount += 1)}`, namespace },
    spec: {
      task: 'Claim.',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'scripted', scriptRef: { name: 's' } },
    },
  };
  const run = (await custom.createNamespacedCustomObject({
    group: 'chamvi.dev',
    version: 'v1alpha1',
    namespace,
    plural: 'codingruns',
    body,
  })) as CodingRun;
  return { ...run, spec: codingRunSpec.parse(run.spec) };
}

/** A pool pod as the pool loop creates it (plus the test's label for the registrar), Ready and wired to a workspace. */
async function readyPoolPod(): Promise<string> {
  const template = await createRun();
  const pod = warmPoolPod(pool, config, template);
  pod.metadata!.labels = { ...pod.metadata!.labels, [testLabel]: namespace };
  const created: V1Pod = await gateway.createPoolPod(pod);
  const name = created.metadata!.name!;
  const ready = await kubectl(['wait', '-n', namespace, '--for=condition=Ready', `pod/${name}`, '--timeout=60s']);
  expect(ready.code).toBe(0);
  await registrar.waitForWorkspace(namespace, name);
  return name;
}

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  gateway = kubernetesWarmPoolGateway(kubeConfig);
  await createNamespace(namespace, { restricted: true });
  rootDir = mkdtempSync(path.join(tmpdir(), 'chamvi-warm-claim-'));
  registrar = await startSandboxExecRegistrar({
    kubeconfig: kubeconfigPath(),
    rootDir,
    labelSelector: `${SANDBOX_POD_SELECTOR},${testLabel}=${namespace}`,
  });
}, 60_000);

afterAll(async () => {
  await registrar?.stop();
  await deleteNamespace(namespace);
  if (rootDir) rmSync(rootDir, { recursive: true, force: true });
});

describe('claiming a warm pool pod', () => {
  it('of ten runs racing for one pod, exactly one gets it, and the pod then carries that run alone', async () => {
    const podName = await readyPoolPod();
    const runs = await Promise.all(Array.from({ length: 10 }, () => createRun()));
    const results = await Promise.all(runs.map((run) => gateway.claimPod(namespace, podName, claimPatch(run, pool, 600))));
    const winners = runs.filter((_, index) => results[index] !== undefined);
    expect(winners).toHaveLength(1);
    const pod = JSON.parse((await kubectl(['get', 'pod', podName, '-n', namespace, '-o', 'json'])).stdout) as {
      metadata: { labels: Record<string, string>; ownerReferences: Array<{ uid: string; controller: boolean }> };
      spec: { activeDeadlineSeconds: number };
    };
    expect(pod.metadata.labels[WARM_POOL_LABEL]).toBeUndefined();
    expect(pod.metadata.labels[RUN_UID_LABEL]).toBe(winners[0]!.metadata.uid);
    expect(pod.metadata.ownerReferences).toEqual([expect.objectContaining({ uid: winners[0]!.metadata.uid, controller: true })]);
    expect(pod.spec.activeDeadlineSeconds).toBe(600);
    // Claimed once, never again: a later claim of the same pod fails too.
    expect(await gateway.claimPod(namespace, podName, claimPatch(await createRun(), pool, 600))).toBeUndefined();
  }, 90_000);
});

for (const mode of ['call', 'serve'] as const) {
  describeSandboxContract(`Kubernetes exec into a claimed warm pool pod (${mode})`, async (options) => {
    const podName = await readyPoolPod();
    const run = await createRun();
    expect(await gateway.claimPod(namespace, podName, claimPatch(run, pool, 600))).toBeDefined();
    const sandbox = createKubernetesSandbox({
      kubeConfig,
      namespace,
      podName,
      // As the workers open it: only into a pod this run controls.
      expectedOwnerUid: run.metadata.uid,
      container: SANDBOX_CONTAINER,
      toolboxCommand: [process.execPath, DEFAULT_TOOLBOX_PATH],
      mode,
      defaultTimeoutMs: 60_000,
      ...(options?.maxResponseBytes ? { maxResponseBytes: options.maxResponseBytes } : {}),
    });
    return { sandbox, cleanup: () => gateway.deletePod(namespace, podName) };
  });
}
