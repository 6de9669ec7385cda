// A RunReconciler over one namespace, for tests that drive it themselves against the real API
// server (a kube gateway or an agent with faults of their own): its caches are snapshots taken
// before each pass, and a warm pool the config names is filled by the pool loop on demand.
import {
  CoreV1Api,
  CustomObjectsApi,
  NetworkingV1Api,
  type KubeConfig,
  type V1ConfigMap,
  type V1NetworkPolicy,
  type V1Pod,
} from '@kubernetes/client-node';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { OperatorConfig } from '../../operator/src/config/operator-config.ts';
import { MANAGED_SELECTOR } from '../../operator/src/controller/run-controller.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import { WarmPoolLoop } from '../../operator/src/controller/warm-pool-loop.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { kubernetesWarmPoolGateway, type WarmPoolGateway } from '../../operator/src/kube/warm-pool-gateway.ts';
import type { RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { WARM_POOL_LABEL } from '../../operator/src/reconcile/warm-pool.ts';
import { eventually } from './operator-process.ts';
import { snapshotCache } from './snapshot-cache.ts';

const logger = { info: () => {}, warn: () => {} };

export interface ReconcilerScene {
  reconciler: RunReconciler;
  /**
   * Takes the caches' snapshots again; with `stalePods`, the pods' stay as they were (a watch
   * that lags); with `hidePod`, the pods' leave that one out (a watch that has not brought it).
   */
  refresh(options?: { stalePods?: boolean; hidePod?: string }): Promise<void>;
  /** Fills the config's warm pool `name` and waits until `ready` of its pods are ready. */
  fillPool(name: string, ready: number): Promise<void>;
}

export function reconcilerScene(
  kubeConfig: KubeConfig,
  namespace: string,
  deps: {
    kube: KubeGateway;
    agent: RunAgent;
    config: OperatorConfig;
    events: EventRecorder;
    /** Wraps the warm pool gateway the reconciler claims with (faults of a test's own). */
    warmGateway?: (real: WarmPoolGateway) => WarmPoolGateway;
  },
): ReconcilerScene {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const networking = kubeConfig.makeApiClient(NetworkingV1Api);
  const runs = snapshotCache<CodingRun>(
    async () =>
      (await custom.listNamespacedCustomObject({ group: 'chamvi.dev', version: 'v1alpha1', plural: 'codingruns', namespace })) as {
        items: CodingRun[];
      },
  );
  const pods = snapshotCache<V1Pod>(() => core.listNamespacedPod({ namespace, labelSelector: MANAGED_SELECTOR }));
  const policies = snapshotCache<V1NetworkPolicy>(() =>
    networking.listNamespacedNetworkPolicy({ namespace, labelSelector: MANAGED_SELECTOR }),
  );
  const configMaps = snapshotCache<V1ConfigMap>(() => core.listNamespacedConfigMap({ namespace, labelSelector: MANAGED_SELECTOR }));
  const warmGateway = kubernetesWarmPoolGateway(kubeConfig);
  const claimGateway = deps.warmGateway?.(warmGateway) ?? warmGateway;
  const warm = deps.config.warmPools.length > 0;
  const { warmGateway: _wrap, ...reconcilerDeps } = deps;
  const reconciler = new RunReconciler({
    caches: { runs, pods, networkPolicies: policies, configMaps, finishedRuns: configMaps },
    ...reconcilerDeps,
    logger,
    isolation: { observe: () => ({ verdict: 'enforced' }) },
    ...(warm ? { warmPools: { gateway: claimGateway, madeIt: () => true } } : {}),
  });
  return {
    reconciler,
    async refresh(options = {}) {
      const pod = options.stalePods ? undefined : pods.refresh((item) => item.metadata?.name !== options.hidePod);
      await Promise.all([runs.refresh(), pod, policies.refresh(), configMaps.refresh()]);
    },
    async fillPool(name, ready) {
      const loop = new WarmPoolLoop({ config: deps.config, gateway: warmGateway, pods, networkPolicies: policies, logger });
      await Promise.all([pods.refresh(), policies.refresh()]);
      await loop.pass();
      await eventually(
        async () => {
          const { items } = await core.listNamespacedPod({ namespace, labelSelector: `${WARM_POOL_LABEL}=${name}` });
          const readyPods = items.filter((pod) =>
            pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True'),
          );
          return readyPods.length >= ready ? true : undefined;
        },
        60_000,
        `the pool ${name} to be ready`,
      );
    },
  };
}
