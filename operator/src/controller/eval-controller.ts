// Wires the CodingEval informers to a work queue and the queue to the eval reconciler: a change
// to an eval, or to a run it controls, enqueues the eval. Its runs are ordinary CodingRuns: the
// run controller admits, runs and ends them as any other; this controller only creates them
// and grades them once they have ended.
import { CustomObjectsApi, Watch, type KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, PLURAL, type CodingRun } from '../api/index.ts';
import { EVAL_KIND, EVAL_PLURAL, type CodingEval } from '../api/coding-eval.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import { EVAL_UID_LABEL } from '../evals/eval-matrix.ts';
import type { EvalGateway } from '../kube/eval-gateway.ts';
import { EvalReconciler } from './eval-reconciler.ts';
import { customObjectSource } from './custom-object-source.ts';
import { CODING_RUN_PAGE_LIMIT, Informer, type CachedObject, type InformerSource } from './informer.ts';
import { MergedCache } from './merged-cache.ts';
import type { ControllerLogger } from './run-controller.ts';
import { WorkQueue } from './work-queue.ts';
import { WatchedNamespaces } from './watched-namespaces.ts';

export type EvalControllerLogger = ControllerLogger;

/** The eval that controls a run, as a queue key. */
function evalKeyOf(run: CodingRun): string | undefined {
  const owners = (run.metadata as { ownerReferences?: Array<{ kind?: string; name?: string; controller?: boolean; apiVersion?: string }> })
    .ownerReferences;
  const owner = owners?.find(
    (reference) => reference.controller === true && reference.kind === EVAL_KIND && reference.apiVersion === API_VERSION,
  );
  return owner?.name ? `${run.metadata.namespace}/${owner.name}` : undefined;
}

export class EvalController {
  private readonly informers: Array<Informer<CachedObject>> = [];
  /** A namespace whose lists are refused holds back no other (watched-namespaces.ts). */
  private readonly watched: WatchedNamespaces;
  private readonly queue: WorkQueue;
  readonly reconciler: EvalReconciler;
  /** Set by stop(): a start() still waiting for its caches then goes no further. */
  private stopped = false;

  constructor(
    kubeConfig: KubeConfig,
    config: OperatorConfig,
    gateway: EvalGateway,
    private readonly logger: EvalControllerLogger,
  ) {
    const watch = new Watch(kubeConfig);
    const custom = kubeConfig.makeApiClient(CustomObjectsApi);
    const namespaces: Array<string | undefined> = config.watchNamespaces.length > 0 ? config.watchNamespaces : [undefined];
    this.watched = new WatchedNamespaces({
      controller: 'evals',
      logger,
      onListed: (_namespace, heldKeys) => {
        for (const key of heldKeys) this.queue.add(key);
      },
    });
    // Evals and runs alike: a run may be ~1.5 MiB and a page is held whole (CODING_RUN_PAGE_LIMIT).
    const inform = <T extends CachedObject>(namespace: string | undefined, source: InformerSource<T>, onEvent: (object: T) => void) => {
      const informer = new Informer<T>(watch, source, { onChange: onEvent, onDelete: onEvent }, logger, undefined, CODING_RUN_PAGE_LIMIT);
      this.informers.push(informer as unknown as Informer<CachedObject>);
      this.watched.add(namespace, informer);
      return informer;
    };
    const evals = namespaces.map((namespace) =>
      inform<CodingEval>(namespace, customObjectSource(custom, namespace, EVAL_PLURAL), (evaluation) =>
        this.queue.add(`${evaluation.metadata.namespace}/${evaluation.metadata.name}`),
      ),
    );
    // Only runs carrying an eval's uid label: the run controller caches every run already, this
    // cache stays the size of the evals' runs.
    const runs = namespaces.map((namespace) =>
      inform<CodingRun>(namespace, customObjectSource(custom, namespace, PLURAL, EVAL_UID_LABEL), (run) => {
        const key = evalKeyOf(run);
        if (key) this.queue.add(key);
      }),
    );
    this.reconciler = new EvalReconciler({
      evals: new MergedCache(evals),
      runs: new MergedCache(runs),
      gateway,
      identity: config.identity,
      logger,
    });
    // An eval whose runs' namespace has not listed would see none of its runs, and create them again.
    this.queue = new WorkQueue(
      async (key) => (this.watched.mayReconcile(key) ? this.reconciler.reconcile(key) : undefined),
      { concurrency: 2, held: true },
      (key, error) =>
        logger.warn(
          { eval: key, err: error instanceof Error ? error.message : String(error) },
          'eval reconcile failed; retrying with backoff',
        ),
    );
  }

  get synced(): boolean {
    return this.informers.every((informer) => informer.hasSynced);
  }

  /** Resolves once each namespace has listed or is set aside (its lists refused): one tenant's namespace holds back no other. */
  async start(): Promise<void> {
    await this.watched.start();
    if (this.stopped) return;
    this.queue.start();
    this.logger.info({}, 'eval caches synced; reconciling evals');
  }

  stop(): void {
    this.stopped = true;
    this.reconciler.stop();
    this.queue.stop();
    this.watched.stop();
  }

  /** Resolves when no key is queued or being reconciled. */
  idle(): Promise<void> {
    return this.queue.idle();
  }
}
