// The egress proxy's Events: a Warning on a run's first refusal of a host (egress-audit.ts),
// about the run. Reported as the proxy, not the operator, so `kubectl describe` says who refused,
// and the chart's `<fullname>-egress-proxy-events` policy holds the proxy's ServiceAccount to
// this one form: an Event it creates in the operator's name is refused.
import { API_VERSION, type CodingRun } from '../api/index.ts';
import { EventRecorder, type EventLogger, type EventReporter } from '../kube/event-recorder.ts';
import type { KubeGateway } from '../kube/kube-gateway.ts';
import type { RunEvent } from '../reconcile/decision.ts';
import type { EgressRun } from './decide-connection.ts';

export const EGRESS_PROXY_REPORTER: EventReporter = { component: 'chamvi-egress-proxy', reportingComponent: 'chamvi.dev/egress-proxy' };

/** EgressAudit's recordEvent, as the proxy's process wires it. */
export function egressRunEvents(
  kube: KubeGateway,
  identity: string,
  logger: EventLogger,
): (run: EgressRun, event: RunEvent) => Promise<void> {
  const events = new EventRecorder(kube, identity, logger, { reporter: EGRESS_PROXY_REPORTER });
  return (run, event) =>
    events.record(
      { apiVersion: API_VERSION, kind: 'CodingRun', metadata: { namespace: run.namespace, name: run.name, uid: run.uid } } as CodingRun,
      event,
    );
}
