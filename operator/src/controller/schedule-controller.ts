// Wires CodingSchedule changes, and phase changes of the runs schedules own, to a work queue
// whose processor is the ScheduleReconciler. Timers for the next scheduled time come from
// the reconciler's requeueAfter; the informers only say when to look again early.
import { CustomObjectsApi, Watch, type KubeConfig } from '@kubernetes/client-node';
import { PLURAL, type CodingRun } from '../api/index.ts';
import { SCHEDULE_LABEL, SCHEDULE_PLURAL, type CodingSchedule } from '../api/coding-schedule.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import type { ScheduleGateway } from '../kube/schedule-gateway.ts';
import { customObjectSource } from './custom-object-source.ts';
import { Informer, type CachedObject } from './informer.ts';
import type { ControllerLogger } from './run-controller.ts';
import { ScheduleReconciler } from './schedule-reconciler.ts';
import { WorkQueue } from './work-queue.ts';

export interface ScheduleControllerDeps {
  kube: ScheduleGateway;
  events: Pick<EventRecorder, 'record'>;
  now?: () => Date;
}

export class ScheduleController {
  private readonly informers: Informer<CachedObject>[] = [];
  private readonly queue: WorkQueue;
  readonly reconciler: ScheduleReconciler;

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
    this.queue = new WorkQueue(
      (key) => this.reconciler.reconcile(key),
      { concurrency: 2, held: true },
      (key, error) => {
        const [namespace, name] = key.split('/');
        logger.warn(
          { namespace, name, err: error instanceof Error ? error.message : String(error) },
          'schedule reconcile failed; retrying with backoff',
        );
      },
    );

    const scheduleKey = (schedule: CodingSchedule) => `${schedule.metadata.namespace}/${schedule.metadata.name}`;
    // A run's owner schedule wants to know when the run appears, ends or goes (Forbid,
    // history, lastSuccessfulTime); its steps are not its business.
    const ownerKey = (run: CodingRun) => {
      const schedule = run.metadata.labels?.[SCHEDULE_LABEL];
      return schedule ? `${run.metadata.namespace}/${schedule}` : undefined;
    };
    for (const namespace of namespaces) {
      this.informers.push(
        new Informer<CodingSchedule>(
          watch,
          customObjectSource<CodingSchedule>(custom, namespace, SCHEDULE_PLURAL),
          {
            onChange: (schedule, previous) => {
              // Our own status writes come back here; only a spec change (or a new object) is news.
              if (!previous || previous.metadata.generation !== schedule.metadata.generation) this.queue.add(scheduleKey(schedule));
            },
            onDelete: () => {},
          },
          logger,
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
            onChange: (run, previous) => {
              const key = ownerKey(run);
              const changed =
                !previous ||
                previous.status?.phase !== run.status?.phase ||
                !previous.metadata.deletionTimestamp !== !run.metadata.deletionTimestamp;
              if (key && changed) this.queue.add(key);
            },
            onDelete: (run) => {
              const key = ownerKey(run);
              if (key) this.queue.add(key);
            },
          },
          logger,
        ) as unknown as Informer<CachedObject>,
      );
    }
  }

  get synced(): boolean {
    return this.informers.every((informer) => informer.hasSynced);
  }

  async start(): Promise<void> {
    await Promise.all(this.informers.map((informer) => informer.start()));
    this.queue.start();
    this.logger.info({}, 'schedule caches synced; scheduling');
  }

  stop(): void {
    this.queue.stop();
    for (const informer of this.informers) informer.stop();
  }

  /** For tests: resolves when no key is queued or being reconciled. */
  idle(): Promise<void> {
    return this.queue.idle();
  }
}
