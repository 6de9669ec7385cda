// The sandbox pod of a run as it stands when nothing is wrong with it (Running, Ready, its
// sandbox container running, owned by the run and labelled as the operator labels it): the pod
// read that the sandbox-lost check (workers/sandbox-lost-check.ts) calls not lost. Tests bend it
// into each way a pod can be lost.
import type { V1Pod } from '@kubernetes/client-node';
import { RUN_UID_LABEL, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { runPodName } from '../../operator/src/reconcile/names.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../../operator/src/reconcile/ownership.ts';
import { ownerReference, SANDBOX_CONTAINER } from '../../operator/src/reconcile/sandbox-pod.ts';

/** The run's standing sandbox pod, at the run's pod name in the run's namespace (uid 'pod-uid'). */
export function standingSandboxPod(run: ParsedCodingRun): V1Pod {
  return {
    metadata: {
      name: runPodName(run),
      namespace: run.metadata.namespace,
      uid: 'pod-uid',
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [RUN_UID_LABEL]: run.metadata.uid! },
      ownerReferences: [ownerReference(run)],
    },
    status: {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True' }],
      containerStatuses: [{ name: SANDBOX_CONTAINER, ready: true, restartCount: 0, image: 'i', imageID: 'i', state: { running: {} } }],
    },
  };
}
