// Tells a sandbox that is lost from one whose toolbox was stopped by code inside it, when a call
// that reached the toolbox got no answer (spec.verify's check: verify-work.ts). Both look the
// same from the exec stream: a TIMEOUT. A lost node does not stay hidden from the API server:
// the node lifecycle controller marks it NotReady once its kubelet misses node-monitor-grace-period
// (40-50 s by default) and sets Ready=False on every pod on it, so one read of the pod tells them
// apart for any stall longer than that (the check's timeout plus 60 s). The sandbox container has
// no readiness probe (a webhook's probe is refused: reconcile/admitted-pod.ts), so nothing in the
// pod can make it read NotReady but its containers ending, which loses the sandbox anyway.
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { ParsedCodingRun } from '../api/index.ts';
import { unlessNotFound } from '../kube/api-errors.ts';
import { runPodName } from '../reconcile/names.ts';
import { isOwnedByRun, whyNotOwned } from '../reconcile/ownership.ts';
import { SANDBOX_CONTAINER } from '../reconcile/sandbox-pod.ts';

/** Why the run's sandbox pod cannot answer (gone, not Running, not Ready), or undefined when it stands; one read of the pod. */
export type SandboxLostCheck = (run: ParsedCodingRun) => Promise<string | undefined>;

/** Why this pod (undefined: none at the name) is not the run's standing sandbox, or undefined when it is. Pure. */
export function whySandboxPodLost(pod: V1Pod | undefined, run: ParsedCodingRun): string | undefined {
  const named = `pod ${run.metadata.namespace}/${runPodName(run)}`;
  if (!pod) return `${named} is gone`;
  if (!isOwnedByRun(pod, run)) return `${named} is not the run's (${whyNotOwned(pod, run)})`;
  if (pod.metadata?.deletionTimestamp) return `${named} is being deleted`;
  const phase = pod.status?.phase;
  if (phase !== 'Running') return `${named} is ${phase ?? 'in no phase'}, not Running`;
  const ready = pod.status?.conditions?.find((condition) => condition.type === 'Ready');
  if (ready?.status !== 'True') {
    const why = ready?.reason ?? ready?.message;
    return `${named} is not Ready${why ? ` (${why})` : ''}: its node may be NotReady`;
  }
  const container = pod.status?.containerStatuses?.find((status) => status.name === SANDBOX_CONTAINER);
  if (!container?.state?.running) return `${named}'s ${SANDBOX_CONTAINER} container is not running`;
  return undefined;
}

/** The check over a read of the pod (undefined when NotFound); a read that fails throws, since it tells nothing. */
export function sandboxLostCheck(readPod: (namespace: string, name: string) => Promise<V1Pod | undefined>): SandboxLostCheck {
  return async (run) => whySandboxPodLost(await readPod(run.metadata.namespace, runPodName(run)), run);
}

/** sandboxLostCheck over the cluster of kubeConfig. */
export function kubernetesSandboxLostCheck(kubeConfig: KubeConfig): SandboxLostCheck {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  return sandboxLostCheck((namespace, name) => unlessNotFound(core.readNamespacedPod({ namespace, name })));
}
