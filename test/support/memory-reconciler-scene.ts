// A RunReconciler over in-memory caches holding one run, for the unit tests that drive a
// reconcile without an API server and read what it did: every call to its kube gateway is a
// vi.fn answering as a write that lands (kube.replaceRunStatus.mock.calls holds the statuses
// written). A test bends it by the pods in the cache, the agent, and answers of its own
// (kube.getRun.mockResolvedValueOnce).
import { vi } from 'vitest';
import type { V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { OperatorConfig } from '../../operator/src/config/operator-config.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { idleAgent, type RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { MemoryCache } from './memory-run-world.ts';

export interface MemoryReconcilerSceneOptions {
  readonly config: OperatorConfig;
  /** The reconciler's clock, stopped. */
  readonly now: Date;
  /** The pods in the cache (the run's sandbox pod, or none). */
  readonly pods?: V1Pod[];
  /** Over the idle agent. */
  readonly agent?: Partial<RunAgent>;
  /** Called with the key of a run the reconciler wakes (a take of its diff ended). */
  readonly wake?: (key: string) => void;
}

/** The reconciler of `run`, and its kube gateway's calls. */
export function memoryReconcilerScene(run: CodingRun, options: MemoryReconcilerSceneOptions) {
  const kube = {
    getRun: vi.fn(async (): Promise<CodingRun | undefined> => run),
    replaceRunStatus: vi.fn(async (stored: CodingRun, status: CodingRun['status']) => ({ ...stored, status })),
    setRunFinalizers: vi.fn(async (stored: CodingRun, finalizers: string[]) => ({
      ...stored,
      metadata: { ...stored.metadata, finalizers },
    })),
    deletePod: vi.fn(async () => {}),
    deleteNetworkPolicy: vi.fn(async () => {}),
    deleteConfigMap: vi.fn(async () => {}),
    createEvent: vi.fn(async () => {}),
    configMapKeys: vi.fn(async () => undefined),
    secretKeysAndLabels: vi.fn(async () => undefined),
  };
  const reconciler = new RunReconciler({
    caches: {
      runs: new MemoryCache([run]),
      pods: new MemoryCache<V1Pod>(options.pods ?? []),
      networkPolicies: new MemoryCache<V1NetworkPolicy>(),
      configMaps: new MemoryCache(),
      finishedRuns: new MemoryCache<V1ConfigMap>(),
    },
    kube: kube as unknown as KubeGateway,
    agent: { ...idleAgent, ...options.agent },
    events: { record: async () => {} } as unknown as EventRecorder,
    config: options.config,
    logger: { info: () => {}, warn: () => {} },
    now: () => options.now,
    ...(options.wake ? { wake: options.wake } : {}),
  });
  return { reconciler, kube };
}
