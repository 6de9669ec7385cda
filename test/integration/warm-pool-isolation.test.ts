// Warm pool isolation against the real API server and kwok: the pool's deny-all
// NetworkPolicy exists before the pool's first pod and selects it, and a run that claims a
// pool pod has the namespace's sandbox deny-all in place before the claim, and both before the agent
// (clone, import, setup: the first run-controlled process) is started. The pool loop and
// the reconciler are the operator's own, with the real gateways; the caches are read again
// from the API server before each pass, and the agent only records what it found.
import {
  CustomObjectsApi,
  KubeConfig,
  NetworkingV1Api,
  CoreV1Api,
  type V1ConfigMap,
  type V1LabelSelector,
  type V1NetworkPolicy,
  type V1Pod,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUN_UID_LABEL, type CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { MANAGED_SELECTOR } from '../../operator/src/controller/run-controller.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import { WarmPoolLoop } from '../../operator/src/controller/warm-pool-loop.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { createKubeGateway, type KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { kubernetesWarmPoolGateway, type WarmPoolGateway } from '../../operator/src/kube/warm-pool-gateway.ts';
import { SANDBOX_DENY_ALL_POLICY } from '../../operator/src/reconcile/sandbox-network-policy.ts';
import { selectorString } from '../support/label-selector.ts';
import { idleAgent, type RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import {
  POOL_ISOLATION_LABEL,
  WARM_POOL_LABEL,
  warmPoolNetworkPolicyName,
  type WarmPoolConfig,
} from '../../operator/src/reconcile/warm-pool.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';
import { snapshotCache } from '../support/snapshot-cache.ts';

const namespace = `warm-iso-${process.pid}`;
const pool: WarmPoolConfig = { name: 'pool', namespace, size: 1 };
const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], warmPools: [pool] }, {});
const logger = { info: () => {}, warn: () => {} };

let kubeConfig: KubeConfig;
let core: CoreV1Api;
let networking: NetworkingV1Api;

/** The pods of the namespace that a policy's podSelector selects, as the API server answers the selector. */
async function selectedBy(selector: V1LabelSelector): Promise<string[]> {
  const labelSelector = selectorString(selector);
  return (await core.listNamespacedPod({ namespace, labelSelector })).items.map((pod) => pod.metadata!.name!);
}

const readPolicy = (name: string) => networking.readNamespacedNetworkPolicy({ namespace, name }).catch(() => undefined);

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  core = kubeConfig.makeApiClient(CoreV1Api);
  networking = kubeConfig.makeApiClient(NetworkingV1Api);
  await createNamespace(namespace, { restricted: true });
  await core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name: 's', namespace }, data: { 'script.json': JSON.stringify({ turns: [{ text: 'done' }] }) } },
  });
}, 60_000);

afterAll(async () => {
  await deleteNamespace(namespace);
});

describe('warm pool isolation', () => {
  const pods = snapshotCache<V1Pod>(() => core.listNamespacedPod({ namespace, labelSelector: MANAGED_SELECTOR }));
  const policies = snapshotCache<V1NetworkPolicy>(() =>
    networking.listNamespacedNetworkPolicy({ namespace, labelSelector: MANAGED_SELECTOR }),
  );
  /** What the loop and the reconciler did, in order, each with what the API server held at that moment. */
  const steps: Array<{ step: string; policies: string[] }> = [];
  const policyNames = async () => (await networking.listNamespacedNetworkPolicy({ namespace })).items.map((p) => p.metadata!.name!);
  let warmGateway: WarmPoolGateway;
  let poolPodName: string;

  beforeAll(() => {
    const real = kubernetesWarmPoolGateway(kubeConfig);
    warmGateway = {
      ...real,
      async createPoolPod(pod) {
        steps.push({ step: 'createPoolPod', policies: await policyNames() });
        return real.createPoolPod(pod);
      },
      async claimPod(ns, name, patch) {
        steps.push({ step: `claim ${name}`, policies: await policyNames() });
        return real.claimPod(ns, name, patch);
      },
    };
  });

  it("creates the pool's deny-all before the pool's first pod, and it selects every pod of the pool", async () => {
    const loop = new WarmPoolLoop({ config, gateway: warmGateway, pods, networkPolicies: policies, logger });
    await pods.refresh();
    await policies.refresh();
    await loop.pass();
    const created = steps.filter((entry) => entry.step === 'createPoolPod');
    expect(created).toHaveLength(1);
    // The API server held the pool's policy when the pod was asked for.
    expect(created[0]!.policies).toContain(warmPoolNetworkPolicyName(pool));

    const policy = (await readPolicy(warmPoolNetworkPolicyName(pool)))!;
    // The API server drops empty lists: no rule at all is what denies everything.
    expect(policy.spec!.policyTypes).toEqual(['Ingress', 'Egress']);
    expect([policy.spec!.ingress ?? [], policy.spec!.egress ?? []]).toEqual([[], []]);
    const [pod] = (await core.listNamespacedPod({ namespace, labelSelector: `${WARM_POOL_LABEL}=${pool.name}` })).items;
    poolPodName = pod!.metadata!.name!;
    expect(await selectedBy(policy.spec!.podSelector!)).toEqual([poolPodName]);
    expect((await kubectl(['wait', '-n', namespace, '--for=condition=Ready', `pod/${poolPodName}`, '--timeout=60s'])).code).toBe(0);

    // A second pass finds the policy in the cache and makes nothing more.
    await pods.refresh();
    await policies.refresh();
    await loop.pass();
    expect(steps.filter((entry) => entry.step === 'createPoolPod')).toHaveLength(1);
  }, 90_000);

  it("a claiming run gets the namespace's sandbox deny-all before the claim, and the agent starts after both, in a pod both deny-alls select", async () => {
    const custom = kubeConfig.makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: 'chamvi.dev',
      version: 'v1alpha1',
      namespace,
      plural: 'codingruns',
      body: {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: 'claimer', namespace },
        spec: {
          task: 'Claim.',
          repository: { url: 'https://github.com/acme/webapp.git' },
          model: { provider: 'scripted', scriptRef: { name: 's' } },
        },
      },
    });
    const runPolicyName = SANDBOX_DENY_ALL_POLICY; // the namespace's, which selects every run's pod
    const realKube = createKubeGateway(kubeConfig);
    const kube: KubeGateway = {
      ...realKube,
      async createNetworkPolicy(policy) {
        const holder = await realKube.createNetworkPolicy(policy);
        steps.push({ step: `createNetworkPolicy ${policy.metadata!.name}`, policies: await policyNames() });
        return holder;
      },
    };
    /** The pod the agent would work in, as the API server held it when the agent was started. */
    let atStart: { pod: V1Pod; policies: string[] } | undefined;
    const agent: RunAgent = {
      ...idleAgent,
      async start(run) {
        const [pod] = (await core.listNamespacedPod({ namespace, labelSelector: `${RUN_UID_LABEL}=${run.metadata.uid}` })).items;
        steps.push({ step: 'startAgent', policies: await policyNames() });
        atStart = { pod: pod!, policies: await policyNames() };
      },
    };
    const runs = snapshotCache<CodingRun>(
      async () =>
        (await custom.listNamespacedCustomObject({ group: 'chamvi.dev', version: 'v1alpha1', namespace, plural: 'codingruns' })) as {
          items: CodingRun[];
        },
    );
    const configMaps = snapshotCache<V1ConfigMap>(() => core.listNamespacedConfigMap({ namespace, labelSelector: MANAGED_SELECTOR }));
    const reconciler = new RunReconciler({
      caches: { runs, pods, networkPolicies: policies, configMaps, finishedRuns: configMaps },
      kube,
      agent,
      events: new EventRecorder(kube, 'warm-iso-test', logger),
      config,
      logger,
      isolation: { observe: () => ({ verdict: 'enforced' }) },
      // The pool pod is the test's, made as the pool loop makes them: it is to be claimed.
      warmPools: { gateway: warmGateway, madeIt: () => true },
    });
    await eventually(
      async () => {
        await Promise.all([runs.refresh(), pods.refresh(), policies.refresh(), configMaps.refresh()]);
        await reconciler.reconcile(`${namespace}/claimer`);
        const status = runs.get(namespace, 'claimer')?.status;
        return atStart ?? (status?.phase === 'Failed' ? status : undefined);
      },
      30_000,
      'the run to claim the pool pod and start its agent',
    );
    expect(atStart, 'the run failed before its agent started').toBeDefined();

    const order = steps.map((entry) => entry.step.split(' ')[0]);
    const policyAt = order.indexOf('createNetworkPolicy');
    const claimAt = order.indexOf('claim');
    expect(policyAt).toBeGreaterThanOrEqual(0);
    expect(claimAt).toBeGreaterThan(policyAt);
    expect(order.indexOf('startAgent')).toBeGreaterThan(claimAt);
    // At the claim the API server already held the namespace's sandbox deny-all (not merely asked for).
    expect(steps[claimAt]!.step).toBe(`claim ${poolPodName}`);
    expect(steps[claimAt]!.policies).toContain(runPolicyName);

    // When the agent starts, its pod is the claimed pool pod, selected by the namespace's deny-all
    // and still by the pool's deny-all (the claim keeps the label it selects).
    expect(atStart!.pod.metadata!.name).toBe(poolPodName);
    expect(atStart!.pod.metadata!.labels![POOL_ISOLATION_LABEL]).toBe(pool.name);
    const runPolicy = (await readPolicy(runPolicyName))!;
    expect(await selectedBy(runPolicy.spec!.podSelector!)).toContain(poolPodName);
    const poolPolicy = (await readPolicy(warmPoolNetworkPolicyName(pool)))!;
    expect(await selectedBy(poolPolicy.spec!.podSelector!)).toContain(poolPodName);
  }, 90_000);
});
