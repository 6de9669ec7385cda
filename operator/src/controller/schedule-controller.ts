// Wires CodingSchedule changes, and phase changes of the runs schedules own, to a work queue
// whose processor is the ScheduleReconciler. Timers for the next scheduled time come from
// the reconciler's requeueAfter; the informers only say when to look again early.
import { CustomObjectsApi, Watch, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, PLURAL, type CodingRun } from '../api/index.ts';
import { SCHEDULE_KIND, SCHEDULE_LABEL, SCHEDULE_PLURAL, type CodingSchedule } from '../api/coding-schedule.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import type { ScheduleGateway } from '../kube/schedule-gateway.ts';
import { customObjectSource } from './custom-object-source.ts';
import { CODING_RUN_PAGE_LIMIT, Informer, type CachedObject } from './informer.ts';
import type { ControllerLogger } from './run-controller.ts';
import { ScheduleReconciler } from './schedule-reconciler.ts';
import { WatchedNamespaces } from './watched-namespaces.ts';
import { WorkQueue } from './work-queue.ts';

export interface ScheduleControllerDeps {
  kube: ScheduleGateway;
  events: Pick<EventRecorder, 'record'>;
  now?: () => Date;
}

/**
 * Schedules reconciled side by side. A reconcile is a few API calls one after another; with
 * two at once, 300 schedules due in the same minute took seconds to work through, and runs
 * late past a short startingDeadlineSeconds were skipped while the operator was healthy.
 */
export const SCHEDULE_RECONCILES_AT_ONCE = 16;

/**
 * Whether a change to a schedule needs it reconciled: a new object, a spec change, or another
 * object under the same name. The operator's own status writes come back here and are not
 * news; a schedule deleted and created again while the watch was down (Argo CD's Replace,
 * Flux's force) has generation 1 again, and only its uid tells it from the one before.
 */
export function scheduleChangeWakes(previous: CodingSchedule | undefined, schedule: CodingSchedule): boolean {
  return !previous || previous.metadata.uid !== schedule.metadata.uid || previous.metadata.generation !== schedule.metadata.generation;
}

type OwnerReference = { apiVersion?: string; kind?: string; name?: string; controller?: boolean };

/**
 * The schedule (`namespace/name`) a change to a run wakes: the CodingSchedule the run's
 * controller reference names, when the run also carries that schedule's label (its reconcile
 * lists runs by the label, so no other run of it counts). The label alone is no sign of the
 * schedule: anyone who may create runs writes it, and every run so labelled woke the schedule
 * at each phase change, each wake a list of every labelled run, ten a page. The reference's uid
 * is not compared: the slim run cache holds no schedule, and the reconcile tells its own runs
 * by uid (runs-of-schedule.ts).
 */
export function scheduleKeyOfRun(run: CodingRun): string | undefined {
  const label = run.metadata.labels?.[SCHEDULE_LABEL];
  if (!label) return undefined;
  const controller = (run.metadata as { ownerReferences?: OwnerReference[] }).ownerReferences?.find((owner) => owner.controller === true);
  const isSchedule = controller?.apiVersion?.split('/')[0] === GROUP && controller.kind === SCHEDULE_KIND && controller.name === label;
  return isSchedule ? `${run.metadata.namespace}/${label}` : undefined;
}

export class ScheduleController {
  private readonly informers: Informer<CachedObject>[] = [];
  /** A namespace whose lists are refused holds back no other (watched-namespaces.ts). */
  private readonly watched: WatchedNamespaces;
  private readonly queue: WorkQueue;
  readonly reconciler: ScheduleReconciler;
  /** Set by stop(): a start() still waiting for its caches then goes no further. */
  private stopped = false;

  constructor(
    kubeConfig: KubeConfig,
    config: Pick<OperatorConfig, 'watchNamespaces'>,
    deps: ScheduleControllerDeps,
    private readonly logger: ControllerLogger,
  ) {
    const watch = new Watch(kubeConfig);
    const custom = kubeConfig.makeApiClient(CustomObjectsApi);
    const namespaces: Array<string | undefined> = config.watchNamespaces.length > 0 ? config.watchNamespaces : [undefined];

    this.reconciler = new ScheduleReconciler({ kube: deps.kube, events: deps.events, logger, now: deps.now ?? (() => new Date()) });
    this.watched = new WatchedNamespaces({
      controller: 'schedules',
      logger,
      onListed: (_namespace, heldKeys) => {
        for (const key of heldKeys) this.queue.add(key);
      },
    });
    this.queue = new WorkQueue(
      async (key) => (this.watched.mayReconcile(key) ? this.reconciler.reconcile(key) : undefined),
      { concurrency: SCHEDULE_RECONCILES_AT_ONCE, held: true },
      (key, error) => {
        const [namespace, name] = key.split('/');
        logger.warn(
          { namespace, name, err: error instanceof Error ? error.message : String(error) },
          'schedule reconcile failed; retrying with backoff',
        );
      },
    );

    const scheduleKey = (schedule: CodingSchedule) => `${schedule.metadata.namespace}/${schedule.metadata.name}`;
    for (const namespace of namespaces) {
      this.informers.push(
        new Informer<CodingSchedule>(
          watch,
          customObjectSource<CodingSchedule>(custom, namespace, SCHEDULE_PLURAL),
          {
            onChange: (schedule, previous) => {
              if (scheduleChangeWakes(previous, schedule)) this.queue.add(scheduleKey(schedule));
            },
            onDelete: (schedule) => this.reconciler.forget(scheduleKey(schedule)),
          },
          logger,
          // A schedule carries a whole run template, a run its spec: a page is held whole before the slim (CODING_RUN_PAGE_LIMIT).
          undefined,
          CODING_RUN_PAGE_LIMIT,
        ) as unknown as Informer<CachedObject>,
        new Informer<CodingRun>(
          watch,
          {
            ...customObjectSource<CodingRun>(custom, namespace, PLURAL, SCHEDULE_LABEL),
            // The schedule needs a run's labels and phase, never its spec or results.
            slim: (run) => ({
              apiVersion: run.apiVersion,
              kind: run.kind,
              metadata: run.metadata,
              spec: {} as CodingRun['spec'],
              ...(run.status?.phase ? { status: { phase: run.status.phase } } : {}),
            }),
          },
          {
            // A run's owner schedule wants to know when the run appears, ends or goes (Forbid,
            // history, lastSuccessfulTime); its steps are not its business.
            onChange: (run, previous) => {
              const key = scheduleKeyOfRun(run);
              const changed =
                !previous ||
                previous.status?.phase !== run.status?.phase ||
                !previous.metadata.deletionTimestamp !== !run.metadata.deletionTimestamp;
              if (key && changed) this.queue.add(key);
            },
            onDelete: (run) => {
              const key = scheduleKeyOfRun(run);
              if (key) this.queue.add(key);
            },
          },
          logger,
          undefined,
          CODING_RUN_PAGE_LIMIT,
        ) as unknown as Informer<CachedObject>,
      );
      // The two just made: this namespace's schedules and runs.
      for (const informer of this.informers.slice(-2)) this.watched.add(namespace, informer);
    }
  }

  get synced(): boolean {
    return this.informers.every((informer) => informer.hasSynced);
  }

  /** Resolves once each namespace has listed or is set aside (its lists refused): one tenant's namespace holds back no other. */
  async start(): Promise<void> {
    await this.watched.start();
    // The lease was lost while the caches filled: this replica no longer schedules.
    if (this.stopped) return;
    this.queue.start();
    this.logger.info({}, 'schedule caches synced; scheduling');
  }

  /** Nothing is reconciled after this, and a reconcile in flight writes nothing more (a deposed leader's run beside the new leader's). */
  stop(): void {
    this.stopped = true;
    this.reconciler.stop();
    this.queue.stop();
    this.watched.stop();
  }

  /** For tests: resolves when no key is queued or being reconciled. */
  idle(): Promise<void> {
    return this.queue.idle();
  }
}
