// Wires the informers to the work queue and the queue to the reconciler. A change to a run,
// or to a pod, policy or ConfigMap the operator owns, enqueues that run's key, except the
// changes that cannot move a decision (run-change-wakes.ts).
import { FINISHED_RUNS_CONFIG_MAP } from '../reconcile/finished-runs.ts';
import {
  CoreV1Api,
  CustomObjectsApi,
  NetworkingV1Api,
  Watch,
  type KubeConfig,
  type V1ConfigMap,
  type V1NetworkPolicy,
  type V1Pod,
} from '@kubernetes/client-node';
import { PLURAL, RUN_LABEL, type CodingRun } from '../api/index.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import { customObjectSource } from './custom-object-source.ts';
import {
  CODING_RUN_PAGE_LIMIT,
  Informer,
  LIST_PAGE_LIMIT,
  clientNodePage,
  type CachedObject,
  type InformerSource,
  type ListAnswer,
} from './informer.ts';
import type { IsolationProbe } from './isolation-probe.ts';
import { RunReconciler, type ObjectCache, type RunReconcilerDeps } from './run-reconciler.ts';
import { MergedCache } from './merged-cache.ts';
import { AdmissionPlanCache } from './admission-plan-cache.ts';
import { WorkQueue } from './work-queue.ts';
import { WatchedNamespaces } from './watched-namespaces.ts';
import type { ReadinessDegraded } from '../observability/health-server.ts';
import { WarmPoolLoop } from './warm-pool-loop.ts';
import type { WarmPoolGateway } from '../kube/warm-pool-gateway.ts';
import type { WarmSessions } from '../sandbox/warm-sessions.ts';
import { WARM_POOL_LABEL } from '../reconcile/warm-pool.ts';
import { controllingRunName } from '../reconcile/ownership.ts';
import type { OperatorMetrics } from '../observability/operator-metrics.ts';
import { configMapChangeWakes, queueChanged, runChangeWakes } from './run-change-wakes.ts';
import { runGoneWith } from './run-gone.ts';
import { OrphanedStateSweep, type RunStateKeys } from './orphaned-state-sweep.ts';
import { jsonRequests } from '../kube/json-requests.ts';
import { listMetadata, metadataOnlyWatch, type ObjectMetadata } from '../kube/metadata-only.ts';

/** Label on every object the operator creates; the informers watch only those. */
export const MANAGED_SELECTOR = 'app.kubernetes.io/managed-by=chamvi-operator';

export interface ControllerLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

const runKey = (object: CachedObject) => `${object.metadata!.namespace}/${object.metadata!.name}`;

export class RunController {
  private readonly informers: Informer<CachedObject>[] = [];
  /** The informers by namespace: a namespace reconciles once all of its have listed, and one that cannot list holds back no other. */
  private readonly watched: WatchedNamespaces;
  private readonly queue: WorkQueue;
  readonly reconciler: RunReconciler;
  private readonly runs: MergedCache<CodingRun>;
  private readonly isolation: IsolationProbe | undefined;
  private readonly warmPools: WarmPoolLoop | undefined;
  private readonly orphanedStates: OrphanedStateSweep | undefined;
  /** Between start (caches synced) and stop: a stopped controller's cache no longer follows the cluster. */
  private live = false;
  /** Set by stop(): a start() still waiting for its caches then goes no further. */
  private stopped = false;

  constructor(
    kubeConfig: KubeConfig,
    config: OperatorConfig,
    deps: Omit<RunReconcilerDeps, 'caches' | 'config' | 'logger' | 'isolation' | 'warmPools' | 'listed'> & {
      isolation?: IsolationProbe;
      /** Warm pools (docs/warm-pools.md): the gateway, and the sessions opened ahead; the pool loop is made here. */
      warmPools?: { gateway: WarmPoolGateway; sessions?: WarmSessions };
      /** The run states in Redis: the states of runs deleted while no operator watched are swept (orphaned-state-sweep.ts). */
      runStates?: RunStateKeys;
    },
    private readonly logger: ControllerLogger,
    metrics?: OperatorMetrics,
  ) {
    const watch = new Watch(kubeConfig);
    const custom = kubeConfig.makeApiClient(CustomObjectsApi);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const networking = kubeConfig.makeApiClient(NetworkingV1Api);
    const namespaces: Array<string | undefined> = config.watchNamespaces.length > 0 ? config.watchNamespaces : [undefined];
    const scoped = (namespace: string | undefined, group: string, resource: string) =>
      `${group}${namespace ? `/namespaces/${namespace}` : ''}/${resource}`;

    const make = <T extends CachedObject>(
      source: InformerSource<T>,
      onOwned: (object: T) => void,
      onRun?: (object: T, previous: T | undefined, deleted: boolean) => void,
      also?: (object: T, deleted: boolean) => void,
      via: Watch = watch,
      pageLimit = LIST_PAGE_LIMIT,
    ) => {
      const informer = new Informer<T>(
        via,
        source,
        {
          onChange: (object, previous) => {
            if (onRun) onRun(object, previous, false);
            else onOwned(object);
            also?.(object, false);
          },
          onDelete: (object) => {
            if (onRun) onRun(object, undefined, true);
            else onOwned(object);
            also?.(object, true);
          },
        },
        logger,
        undefined,
        pageLimit,
      );
      this.informers.push(informer as unknown as Informer<CachedObject>);
      return informer;
    };
    const enqueueOwner = (object: CachedObject) => {
      // The ownerReference carries the whole name; the label is cut for names over 63 characters.
      const runName = controllingRunName(object) ?? object.metadata?.labels?.[RUN_LABEL];
      if (runName) this.queue.add(`${object.metadata!.namespace}/${runName}`);
    };
    // Told of every run and sandbox pod change: the admission plan is made again only after one.
    const admissionPlans = new AdmissionPlanCache({ changesReported: true });
    const onRun = (run: CodingRun, previous: CodingRun | undefined, deleted: boolean) => {
      // Before its key is queued: the deletion's object (or the run a relist found replaced) is
      // the last sight of the run's uid, which the reconcile that finds it gone needs to stop its
      // agent (a finalizer someone removed).
      const gone = runGoneWith(previous, run, deleted);
      if (gone) this.reconciler.runDeleted(gone);
      admissionPlans.runChanged(previous, run);
      if (runChangeWakes(previous, run)) this.queue.add(runKey(run));
      // The queue changed (maxActiveRuns): a slot freed up, a run left the queue, or a new run
      // (or one seen for the first time) came. Wake the run each namespace serves next.
      if (queueChanged(previous, run)) this.reconciler.wakeQueueHeads();
    };

    const runInformers = namespaces.map((namespace) =>
      make<CodingRun>(
        // Custom objects come back as plain JSON (timestamps as strings), like watch events.
        customObjectSource<CodingRun>(custom, namespace, PLURAL),
        () => {},
        onRun,
        undefined,
        watch,
        // Runs are big (up to ~1.5 MiB each) and a page is held whole: CODING_RUN_PAGE_LIMIT. The
        // cache keeps each run whole (no slim: the reconciler reads its spec), so the page bounds
        // a start's or relist's peak, not what the runs kept in the namespace cost.
        CODING_RUN_PAGE_LIMIT,
      ),
    );
    // What the operator created (pods, policies, ConfigMaps) carries MANAGED_SELECTOR; only
    // those are watched, and a change to one enqueues its run (ConfigMaps: see below).
    type ManagedList<T> = (
      namespace: string | undefined,
      query: { labelSelector: string; limit: number; _continue?: string },
    ) => Promise<ListAnswer<T>>;
    const owned = <T extends CachedObject>(
      groupPath: string,
      resource: string,
      list: ManagedList<T>,
      slim?: (object: T) => T,
      also?: (object: T, deleted: boolean) => void,
      onOwned: (object: T) => void = enqueueOwner,
    ) =>
      namespaces.map((namespace) =>
        make<T>(
          {
            path: scoped(namespace, groupPath, resource),
            labelSelector: MANAGED_SELECTOR,
            list: (page) => list(namespace, { labelSelector: MANAGED_SELECTOR, ...clientNodePage(page) }),
            ...(slim ? { slim } : {}),
          },
          onOwned,
          undefined,
          also,
        ),
      );
    const podInformers = owned<V1Pod>(
      '/api/v1',
      'pods',
      (namespace, query) => (namespace ? core.listNamespacedPod({ namespace, ...query }) : core.listPodForAllNamespaces(query)),
      undefined,
      // A finished run holds its slot until its pod goes (admission.ts): then wake the waiting.
      // A pool pod that changed (Ready, above all) is looked at by the pool loop now, not at its
      // next tick: its tool session opens ahead only once the loop has seen it ready.
      (pod, deleted) => {
        admissionPlans.sandboxPodChanged();
        if (deleted || pod.metadata?.deletionTimestamp) this.reconciler.wakeQueueHeads();
        if (pod.metadata?.labels?.[WARM_POOL_LABEL]) this.warmPools?.poke();
      },
    );
    const policyInformers = owned<V1NetworkPolicy>(
      '/apis/networking.k8s.io/v1',
      'networkpolicies',
      (namespace, query) =>
        namespace ? networking.listNamespacedNetworkPolicy({ namespace, ...query }) : networking.listNetworkPolicyForAllNamespaces(query),
      undefined,
      // A namespace's sandbox policies have no owner to wake: the reconciler wakes its runs.
      (policy, deleted) => this.reconciler.sandboxPolicyChanged(policy, deleted),
    );
    // A run's diff (up to 1 MiB, written after each step that may have changed files) and its
    // transcript chunks (written after every step): the reconciler needs only their names and
    // owners, so they are listed and watched as metadata (kube/metadata-only.ts), and a write
    // costs the operator a kilobyte, not the object. A change wakes a run only when
    // configMapChangeWakes says so.
    const metadataWatch = metadataOnlyWatch(kubeConfig);
    const requests = jsonRequests(kubeConfig);
    const configMapInformers = namespaces.map((namespace) => {
      const path = scoped(namespace, '/api/v1', 'configmaps');
      return make<ObjectMetadata>(
        {
          path,
          labelSelector: MANAGED_SELECTOR,
          list: (page) => listMetadata(requests, path, MANAGED_SELECTOR, page),
          // What the server sent already; kept so, whatever a server answers.
          slim: ({ apiVersion, kind, metadata }) => ({ apiVersion, kind, metadata }),
        },
        (configMap) => {
          const runName = controllingRunName(configMap) ?? configMap.metadata?.labels?.[RUN_LABEL];
          if (configMapChangeWakes(runName ? this.runs.get(configMap.metadata!.namespace!, runName) : undefined)) enqueueOwner(configMap);
        },
        undefined,
        undefined,
        metadataWatch,
      );
    });
    // chamvi-finished-runs keeps its data (bounded, one per namespace): a new run is checked
    // against it (reconcile/finished-runs.ts). Watched by its name; a change wakes no run.
    const finishedRunsSelector = `metadata.name=${FINISHED_RUNS_CONFIG_MAP}`;
    const finishedRunsInformers = namespaces.map((namespace) =>
      make<V1ConfigMap>(
        {
          path: scoped(namespace, '/api/v1', 'configmaps'),
          labelSelector: MANAGED_SELECTOR,
          fieldSelector: finishedRunsSelector,
          list: () =>
            namespace
              ? core.listNamespacedConfigMap({ namespace, labelSelector: MANAGED_SELECTOR, fieldSelector: finishedRunsSelector })
              : core.listConfigMapForAllNamespaces({ labelSelector: MANAGED_SELECTOR, fieldSelector: finishedRunsSelector }),
        },
        () => {},
      ),
    );

    // A namespace's keys wait for all five of its caches; its keys queued meanwhile go on once it has listed.
    this.watched = new WatchedNamespaces({
      controller: 'runs',
      logger,
      onListed: (_namespace, heldKeys) => {
        // Its runs were out of the admission plans (run-reconciler.ts); they join them now.
        admissionPlans.namespaceListed();
        for (const key of heldKeys) this.queue.add(key);
      },
    });
    namespaces.forEach((namespace, index) => {
      for (const informers of [runInformers, podInformers, policyInformers, configMapInformers, finishedRunsInformers])
        this.watched.add(namespace, informers[index]!);
    });
    this.runs = new MergedCache(runInformers);
    // A namespace's probe verdict lets the runs waiting there go on (or fail) at once.
    this.isolation = deps.isolation;
    this.isolation?.setOnVerdict((namespace) => this.wakeWaitingRuns(namespace));
    const pods = new MergedCache(podInformers);
    const networkPolicies = new MergedCache(policyInformers);
    // A namespace set aside (its lists refused) is one the pool loop and admission leave alone: its caches may be empty or partial.
    const listed = (namespace: string) => this.watched.listed(namespace);
    const { warmPools: warmDeps, runStates, ...reconcilerDeps } = deps;
    const warmGateway = warmDeps?.gateway;
    const sessions = warmDeps?.sessions;
    this.warmPools = warmGateway
      ? new WarmPoolLoop({ config, gateway: warmGateway, pods, networkPolicies, listed, logger, ...(sessions ? { sessions } : {}) })
      : undefined;
    this.orphanedStates = runStates
      ? new OrphanedStateSweep({
          states: runStates,
          runs: this.runs,
          agent: deps.agent,
          watchNamespaces: config.watchNamespaces,
          listed,
          logger,
          ...(metrics ? { metrics } : {}),
        })
      : undefined;
    this.reconciler = new RunReconciler({
      ...reconcilerDeps,
      config,
      logger,
      ...(metrics ? { metrics } : {}),
      // A claim takes a pod out of its pool: refill at once.
      ...(warmGateway
        ? {
            warmPools: {
              gateway: warmGateway,
              onClaim: (pool, podName) => this.warmPools?.claimed(pool, podName),
              madeIt: (pod, pool) => this.warmPools?.madeIt(pod, pool) ?? false,
            },
          }
        : {}),
      wake: (key) => this.queue.add(key),
      listed,
      admissionPlans,
      caches: {
        runs: this.runs,
        pods,
        networkPolicies,
        configMaps: new MergedCache(configMapInformers),
        finishedRuns: new MergedCache(finishedRunsInformers),
      },
    });
    const timed = async (key: string) => {
      const started = performance.now();
      let outcome = 'error';
      try {
        const result = await this.reconciler.reconcile(key);
        outcome = 'ok';
        return result;
      } finally {
        metrics?.reconcileDuration.observe({ outcome }, (performance.now() - started) / 1000);
      }
    };
    // Held until start() (each namespace listed, or set aside), and after it a key of a
    // namespace that has not listed yet is held back until it does (mayReconcile): a run
    // reconciled while the pod cache is still empty looks as if its pod were gone, and would
    // be failed as SandboxLost (and its pod deleted) by a replica that just took over the lease.
    const listedFirst = async (key: string) => (this.watched.mayReconcile(key) ? timed(key) : undefined);
    this.queue = new WorkQueue(listedFirst, { concurrency: config.reconcileConcurrency, held: true }, (key, error) => {
      metrics?.reconcileErrors.inc();
      const [namespace, name] = key.split('/');
      logger.warn(
        {
          namespace,
          name,
          uid: this.runs.get(namespace!, name!)?.metadata.uid,
          err: error instanceof Error ? error.message : String(error),
        },
        'reconcile failed; retrying with backoff',
      );
    });
  }

  /** The namespace's isolation verdict came: every run of it waiting there (not only the queue's head) goes on. */
  private wakeWaitingRuns(namespace: string): void {
    for (const run of this.runs.list()) {
      if (run.metadata.namespace !== namespace) continue;
      const phase = run.status?.phase;
      if (phase === undefined || phase === 'Pending') this.queue.add(runKey(run));
    }
  }

  /** Runs by phase and reason in the cache, for the chamvi_runs gauge. */
  runsByPhase(): Array<{ phase: string; reason: string; count: number }> {
    const counts = new Map<string, number>();
    for (const run of this.runs.list()) {
      const key = `${run.status?.phase ?? 'New'}\u0000${run.status?.reason ?? ''}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return [...counts].map(([key, count]) => {
      const [phase = '', reason = ''] = key.split('\u0000');
      return { phase, reason, count };
    });
  }

  get synced(): boolean {
    return this.informers.every((informer) => informer.hasSynced);
  }

  /**
   * What /readyz says of the caches: not ready until started, ready but naming the namespaces
   * it started without (watched-namespaces.ts cachesReadiness).
   */
  readiness(): string | ReadinessDegraded | undefined {
    return this.watched.readiness();
  }

  /**
   * Starts watching; resolves when every namespace's caches have their first list, or the
   * namespace is set aside (its lists refused, or failing past the grace): the others are not
   * held back by it, and its keys are reconciled once it lists.
   */
  async start(): Promise<void> {
    await this.watched.start();
    // The lease was lost while the caches filled: going on would start the pool loop's timer on
    // a stopped controller (holding its caches for good) and call a stale cache live.
    if (this.stopped) return;
    this.queue.start();
    this.warmPools?.start();
    // Only now: a run not in a cache still filling would look deleted.
    this.orphanedStates?.start();
    this.live = true;
    const unlisted = this.watched.unlisted().map((each) => each.namespace);
    this.logger.info({ runs: this.runs.list().length, ...(unlisted.length > 0 ? { unlisted } : {}) }, 'caches synced; reconciling');
  }

  /** The run cache while it follows the cluster (workers/recent-runs.ts checks what they remember against it). */
  get liveRuns(): ObjectCache<CodingRun> | undefined {
    return this.live ? this.runs : undefined;
  }

  stop(): void {
    this.stopped = true;
    this.live = false;
    this.reconciler.stop();
    void this.isolation?.stop();
    this.warmPools?.stop();
    this.orphanedStates?.stop();
    this.queue.stop();
    this.watched.stop();
  }

  /** Resolves when no key is queued or being reconciled, and no sweep of run states or warm pool pass is under way. */
  async idle(): Promise<void> {
    await Promise.all([this.queue.idle(), this.orphanedStates?.settled(), this.warmPools?.settled()]);
  }
}
