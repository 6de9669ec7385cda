// A RunReconciler over caches held in memory and a gateway that records each call, for unit
// tests (and benchmarks) of what one reconcile costs: how many plans, how many DELETEs. A
// status or finalizer write lands in the run cache at once and is reported to the admission
// plan cache as the run watch reports it; `stale` keeps the ConfigMap cache as it was (a
// watch that has not brought the deletes). The ConfigMaps the API server holds are kept apart
// from the cache, and a delete naming a uid another ConfigMap holds is refused with a 409, as
// the API server refuses it (kube-gateway.ts deleteConfigMap), deleting nothing.
import type { V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { OperatorConfig } from '../../operator/src/config/operator-config.ts';
import type { AdmissionPlanCache } from '../../operator/src/controller/admission-plan-cache.ts';
import {
  RunReconciler,
  type FairShareSources,
  type ObjectCache,
  type RunReconcilerDeps,
} from '../../operator/src/controller/run-reconciler.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import type { ObjectMetadata } from '../../operator/src/kube/metadata-only.ts';
import { idleAgent, type RunAgent } from '../../operator/src/reconcile/run-agent.ts';

export class MemoryCache<T extends { metadata?: { name?: string; namespace?: string } }> implements ObjectCache<T> {
  readonly items = new Map<string, T>();
  constructor(items: T[] = []) {
    for (const item of items) this.put(item);
  }
  put(item: T): T | undefined {
    const key = `${item.metadata!.namespace}/${item.metadata!.name}`;
    const previous = this.items.get(key);
    this.items.set(key, item);
    return previous;
  }
  remove(namespace: string, name: string): T | undefined {
    const previous = this.items.get(`${namespace}/${name}`);
    this.items.delete(`${namespace}/${name}`);
    return previous;
  }
  get(namespace: string, name: string): T | undefined {
    return this.items.get(`${namespace}/${name}`);
  }
  list(): T[] {
    return [...this.items.values()];
  }
}

/** A delete's uid precondition refused, as the API server answers it (409 Conflict, the shape isConflict reads). */
function preconditionFailed(name: string, uid: string, held: string | undefined): Error {
  return Object.assign(
    new Error(
      `Operation cannot be fulfilled on configmaps "${name}": Precondition failed: UID in precondition: ${uid}, UID in object meta: ${held ?? ''}`,
    ),
    { code: 409 },
  );
}

export interface MemoryRunWorld {
  reconciler: RunReconciler;
  runs: MemoryCache<CodingRun>;
  configMaps: MemoryCache<ObjectMetadata>;
  /** The ConfigMaps the API server holds (configMaps is what the cache shows of them): a test may make one again here. */
  storedConfigMaps: MemoryCache<ObjectMetadata>;
  /** Every gateway call, by method. */
  calls: Map<string, number>;
  /** The ConfigMaps deleted, in order (a DELETE refused for another's uid deletes nothing and is not here). */
  deletedConfigMaps: string[];
  /** Puts a run in the cache as the watch would, reporting the change to the plan cache. */
  update(run: CodingRun): void;
  /** Takes a run out of the cache as the watch's deletion would, telling the plan cache and the reconciler (run-controller.ts). */
  remove(namespace: string, name: string): void;
}

export function memoryRunWorld(options: {
  runs: CodingRun[];
  config: OperatorConfig;
  configMaps?: ObjectMetadata[];
  admissionPlans?: AdmissionPlanCache;
  fairShare?: FairShareSources;
  /** What the isolation probe found in each namespace (RunReconciler's isolation); absent, no probe runs. */
  isolation?: RunReconcilerDeps['isolation'];
  /** The ConfigMap cache does not see the deletes. */
  stale?: boolean;
  /** The agent the reconciler starts and stops runs with; idleAgent when absent. */
  agent?: RunAgent;
  /** Whether each watched namespace has listed (RunReconciler's listed); absent, every one has. */
  listed?: RunReconcilerDeps['listed'];
  /** The reconciler's wake (the work queue's add); absent, nothing is woken. */
  wake?: RunReconcilerDeps['wake'];
  /** The reconciler's log lines; absent, dropped. */
  logger?: RunReconcilerDeps['logger'];
  /**
   * A write that leaves a deleting run without finalizers deletes it, as the API server does,
   * and the watch reports that before the write answers (the order is not given).
   */
  deletionSeenBeforeAnswer?: boolean;
  /** Runs (by key) whose status writes the API server answers but whose watch has not brought them: the cache keeps the run as it was. */
  writesNotSeen?: ReadonlySet<string>;
}): MemoryRunWorld {
  const runs = new MemoryCache(options.runs);
  const configMaps = new MemoryCache(options.configMaps ?? []);
  const storedConfigMaps = new MemoryCache(options.configMaps ?? []);
  const calls = new Map<string, number>();
  const deletedConfigMaps: string[] = [];
  let version = 1;
  const count = (method: string) => calls.set(method, (calls.get(method) ?? 0) + 1);
  const update = (run: CodingRun) => {
    const previous = runs.put(run);
    options.admissionPlans?.runChanged(previous, run);
  };
  const written = (run: CodingRun, change: Partial<CodingRun>): CodingRun => {
    const next = { ...run, ...change, metadata: { ...run.metadata, ...change.metadata, resourceVersion: String(++version) } };
    update(next);
    return next;
  };
  const kube = {
    async replaceRunStatus(run: CodingRun, status: CodingRun['status']) {
      count('replaceRunStatus');
      const key = `${run.metadata.namespace}/${run.metadata.name}`;
      if (options.writesNotSeen?.has(key))
        return { ...run, status, metadata: { ...run.metadata, resourceVersion: String(++version) } } as CodingRun;
      return written(runs.get(run.metadata.namespace, run.metadata.name) ?? run, { status } as Partial<CodingRun>);
    },
    async setRunFinalizers(run: CodingRun, finalizers: string[]) {
      count('setRunFinalizers');
      const stored = written(run, { metadata: { ...run.metadata, finalizers } });
      if (options.deletionSeenBeforeAnswer && finalizers.length === 0 && run.metadata.deletionTimestamp)
        remove(run.metadata.namespace, run.metadata.name);
      return stored;
    },
    async createPod(pod: V1Pod) {
      count('createPod');
      return { created: pod };
    },
    async deleteConfigMap(namespace: string, name: string, uid?: string) {
      count('deleteConfigMap');
      const held = storedConfigMaps.get(namespace, name);
      if (held && uid !== undefined && held.metadata?.uid !== uid) throw preconditionFailed(name, uid, held.metadata?.uid);
      deletedConfigMaps.push(name);
      storedConfigMaps.remove(namespace, name);
      if (!options.stale) configMaps.remove(namespace, name);
    },
    async createEvent() {
      count('createEvent');
    },
    // No ConfigMap a run names exists (a scripted run's script): validation judges the lists first.
    async configMapKeys() {
      count('configMapKeys');
      return undefined;
    },
  };
  const missing = new Proxy(kube, {
    get(target, property) {
      if (property in target) return target[property as keyof typeof target];
      if (property === 'then') return undefined;
      return () => Promise.reject(new Error(`memory world: the gateway has no ${String(property)}`));
    },
  }) as unknown as KubeGateway;
  const events = { record: async () => count('event') } as unknown as EventRecorder;
  const logger = options.logger ?? { info: () => {}, warn: () => {} };
  const reconciler = new RunReconciler({
    caches: {
      runs,
      pods: new MemoryCache<V1Pod>(),
      networkPolicies: new MemoryCache<V1NetworkPolicy>(),
      configMaps,
      finishedRuns: new MemoryCache<V1ConfigMap>(),
    },
    kube: missing,
    agent: options.agent ?? idleAgent,
    events,
    config: options.config,
    logger,
    now: () => new Date('2026-11-29T12:00:00Z'),
    ...(options.admissionPlans ? { admissionPlans: options.admissionPlans } : {}),
    ...(options.fairShare ? { fairShare: options.fairShare } : {}),
    ...(options.isolation ? { isolation: options.isolation } : {}),
    ...(options.listed ? { listed: options.listed } : {}),
    ...(options.wake ? { wake: options.wake } : {}),
  });
  function remove(namespace: string, name: string): void {
    const last = runs.remove(namespace, name);
    if (!last) return;
    reconciler.runDeleted(last);
    options.admissionPlans?.runChanged(undefined, last);
  }
  return { reconciler, runs, configMaps, storedConfigMaps, calls, deletedConfigMaps, update, remove };
}
