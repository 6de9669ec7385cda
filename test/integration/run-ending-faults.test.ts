// A run the controller ends (here a cancel) is written terminal first, then its agent and pod
// are stopped. When a stop fails (an API server hiccup on the pod's delete), the reconcile is
// retried, and the retry decides about a finished run, which has no transition left to tell.
// The ending's Event must not depend on the stop: against the real API server and kwok.
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
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { MANAGED_SELECTOR } from '../../operator/src/controller/run-controller.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { createKubeGateway, type KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import { idleAgent, type RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { createNamespace, deleteNamespace, kubeconfigPath } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';
import { snapshotCache } from '../support/snapshot-cache.ts';

const logger = { info: () => {}, warn: () => {} };
const runsPath = (namespace: string) => ({ group: 'chamvi.dev', version: 'v1alpha1', plural: 'codingruns', namespace });
const runPath = (namespace: string, name: string) => ({ ...runsPath(namespace), name });

let kubeConfig: KubeConfig;
let core: CoreV1Api;
let custom: CustomObjectsApi;
const namespace = `ending-faults-${process.pid}`;

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  core = kubeConfig.makeApiClient(CoreV1Api);
  custom = kubeConfig.makeApiClient(CustomObjectsApi);
  await createNamespace(namespace, { restricted: true });
  await core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name: 's', namespace }, data: { 'script.json': JSON.stringify({ turns: [{ text: 'done' }] }) } },
  });
});

afterAll(async () => {
  await deleteNamespace(namespace);
});

describe('a run ended by the controller whose pod delete fails once', () => {
  it('still records the ending Event, once, and deletes the pod on the retry', async () => {
    const realKube = createKubeGateway(kubeConfig);
    let failDeletes = 0;
    const kube: KubeGateway = {
      ...realKube,
      async deletePod(podNamespace, name) {
        if (failDeletes > 0) {
          failDeletes--;
          throw Object.assign(new Error('etcdserver: request timed out'), { code: 500 });
        }
        return realKube.deletePod(podNamespace, name);
      },
    };
    // The workers hold the run (a job of it is queued); its diff is empty.
    const agent: RunAgent = { ...idleAgent, inspect: async () => ({ state: 'stepping', moving: true }) };
    const networking = kubeConfig.makeApiClient(NetworkingV1Api);
    const runs = snapshotCache<CodingRun>(
      async () => (await custom.listNamespacedCustomObject(runsPath(namespace))) as { items: CodingRun[] },
    );
    const pods = snapshotCache<V1Pod>(() => core.listNamespacedPod({ namespace, labelSelector: MANAGED_SELECTOR }));
    const policies = snapshotCache<V1NetworkPolicy>(() =>
      networking.listNamespacedNetworkPolicy({ namespace, labelSelector: MANAGED_SELECTOR }),
    );
    const configMaps = snapshotCache<V1ConfigMap>(() => core.listNamespacedConfigMap({ namespace, labelSelector: MANAGED_SELECTOR }));
    const reconciler = new RunReconciler({
      caches: { runs, pods, networkPolicies: policies, configMaps, finishedRuns: configMaps },
      kube,
      agent,
      events: new EventRecorder(realKube, 'run-ending-faults', logger),
      config: loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'] }, {}),
      logger,
      isolation: { observe: () => ({ verdict: 'enforced' }) },
    });
    /** One reconcile from fresh caches; whether it threw. */
    const pass = async (): Promise<boolean> => {
      await Promise.all([runs.refresh(), pods.refresh(), policies.refresh(), configMaps.refresh()]);
      try {
        await reconciler.reconcile(`${namespace}/ended`);
        return true;
      } catch {
        return false;
      }
    };
    const read = async () => (await custom.getNamespacedCustomObject(runPath(namespace, 'ended'))) as CodingRun;

    await custom.createNamespacedCustomObject({
      ...runsPath(namespace),
      body: {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: 'ended', namespace },
        spec: {
          task: 'End.',
          repository: { url: 'https://github.com/acme/webapp.git' },
          model: { provider: 'scripted', scriptRef: { name: 's' } },
        },
      },
    });
    await eventually(
      async () => ((await pass()) && (await read()).status?.phase === 'Running' ? true : undefined),
      60_000,
      'the run to run',
    );
    const podName = (await read()).status!.podName!;

    await custom.patchNamespacedCustomObject({
      ...runPath(namespace, 'ended'),
      body: [{ op: 'add', path: `/metadata/annotations`, value: { [CANCEL_ANNOTATION]: 'changed my mind' } }],
    });
    failDeletes = 1;
    // The first pass keeps the diff; the one after ends the run and meets the failing delete.
    await eventually(async () => ((await read()).status?.phase === 'Cancelled' ? true : (await pass(), undefined)), 30_000, 'the cancel');
    expect(failDeletes, 'the pod delete failed once').toBe(0);
    await eventually(async () => ((await pass()) ? true : undefined), 30_000, 'a reconcile that does not throw');
    // kwok removes a deleted pod at once: gone counts as deleted.
    await eventually(
      async () => {
        const pod = await core.readNamespacedPod({ namespace, name: podName }).catch(() => undefined);
        return !pod || pod.metadata?.deletionTimestamp ? true : undefined;
      },
      30_000,
      'the pod to be deleted',
    );
    const events = (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=ended` })).items;
    expect(events.filter((event) => event.reason === 'Cancelled').map((event) => event.count ?? 1)).toEqual([1]);
  }, 120_000);
});
