// Kubernetes Events for a run, so `kubectl describe codingrun` tells its story. Best
// effort: an Event that cannot be written is logged, never fails a reconcile. A message may
// quote a check's output or git's error and kubectl prints it as it is, so it is written on
// one line, hidden characters spelled out (text/one-line-text.ts), whoever composed it.
import type { CodingRun } from '../api/index.ts';
import type { RunEvent } from '../reconcile/decision.ts';
import { runLogFields } from '../observability/run-log-fields.ts';
import { oneLineText } from '../text/one-line-text.ts';
import { eventName } from './event-name.ts';
import type { KubeGateway } from './kube-gateway.ts';

/** The most of a message an Event carries (events.k8s.io's note is at most 1 kB). */
const EVENT_MESSAGE_CHARACTERS = 1024;

export interface EventLogger {
  warn(fields: object, message: string): void;
}

/** Who an Event says reported it (`kubectl describe`'s From column is `component`). */
export interface EventReporter {
  component: string;
  reportingComponent: string;
}

export const OPERATOR_REPORTER: EventReporter = { component: 'chamvi-operator', reportingComponent: 'chamvi.dev/operator' };

export interface EventRecorderOptions {
  now?: () => Date;
  /** The operator unless given: the egress proxy reports as itself (egress/egress-run-events.ts). */
  reporter?: EventReporter;
}

export class EventRecorder {
  private readonly now: () => Date;
  private readonly reporter: EventReporter;

  constructor(
    private readonly kube: KubeGateway,
    private readonly identity: string,
    private readonly logger: EventLogger,
    options: EventRecorderOptions = {},
  ) {
    this.now = options.now ?? (() => new Date());
    this.reporter = options.reporter ?? OPERATOR_REPORTER;
  }

  /** `run` is any object the operator reports on: a CodingRun, or a CodingSchedule. */
  async record(
    run: Pick<CodingRun, 'apiVersion' | 'kind'> & { metadata: Pick<CodingRun['metadata'], 'name' | 'namespace' | 'uid'> },
    event: RunEvent,
  ): Promise<void> {
    const time = this.now();
    try {
      await this.kube.createEvent({
        metadata: {
          name: eventName(run.metadata.name, time),
          namespace: run.metadata.namespace,
        },
        involvedObject: {
          apiVersion: run.apiVersion,
          kind: run.kind,
          name: run.metadata.name,
          namespace: run.metadata.namespace,
          uid: run.metadata.uid,
        },
        type: event.type,
        reason: event.reason,
        message: oneLineText(event.message, EVENT_MESSAGE_CHARACTERS),
        source: { component: this.reporter.component },
        reportingComponent: this.reporter.reportingComponent,
        reportingInstance: this.identity.slice(0, 128),
        firstTimestamp: time,
        lastTimestamp: time,
        count: 1,
      });
    } catch (error) {
      this.logger.warn({ ...runLogFields(run), reason: event.reason, err: String(error) }, 'could not record event');
    }
  }
}
