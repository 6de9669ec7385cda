// Tells a sandbox that is lost from one whose toolbox was stopped by code inside it, when a call
// that reached the toolbox got no answer (spec.verify's check: verify-work.ts). Both look the
// same from the exec stream: a TIMEOUT. A lost node does not stay hidden from the API server:
// the node lifecycle controller marks it NotReady once its kubelet misses node-monitor-grace-period
// (40-50 s by default) and sets Ready=False on every pod on it, so one read of the pod tells them
// apart for any stall longer than that (the check's timeout plus 60 s). The sandbox container has
// no readiness probe (a webhook's probe is refused: reconcile/admitted-pod.ts), so nothing in the
// pod can make it read NotReady but its containers ending, which loses the sandbox anyway.
// The check and the restore of the protected paths before it judge an unanswered call by one rule
// (judgeUnansweredCall).
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { ParsedCodingRun } from '../api/index.ts';
import { unlessNotFound } from '../kube/api-errors.ts';
import { runPodName } from '../reconcile/names.ts';
import { isOwnedByRun, whyNotOwned } from '../reconcile/ownership.ts';
import { SandboxError } from '../sandbox/sandbox-error.ts';
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

/** What judgeUnansweredCall needs: the pod read (absent in local mode) and a logger. */
export interface UnansweredCallDependencies {
  sandboxLost?: SandboxLostCheck;
  logger: { warn(fields: object, message: string): void };
}

/**
 * The one rule for a spec.verify call the sandbox did not answer (the check, verify-work.ts; the
 * restore of the protected paths, restore-protected.ts). Returns when the TIMEOUT is the work's
 * own: code in the pod stopped the toolbox, and the caller fails the check. Throws a TIMEOUT, for
 * the finalize to be retried into SandboxLost, when it is the sandbox's: a call never written to
 * the toolbox did not run, and a lost node (NotReady, its kubelet hung) stalls the exec stream
 * just as a stopped toolbox does. One read of the pod, only on this path; a read that fails
 * tells nothing, and a retry is the honest answer. Without the read (local mode: the sandbox is
 * a process here, on no node) every written TIMEOUT is the work's.
 */
export async function judgeUnansweredCall(deps: UnansweredCallDependencies, run: ParsedCodingRun, timeout: SandboxError): Promise<void> {
  if (timeout.written === false) throw timeout;
  if (!deps.sandboxLost) return;
  let lost: string | undefined;
  try {
    lost = await deps.sandboxLost(run);
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    const message = `${timeout.message}; reading the sandbox pod to tell a stopped toolbox from a lost sandbox failed: ${detail}`;
    throw new SandboxError('TIMEOUT', message, { cause: timeout });
  }
  if (lost === undefined) return;
  deps.logger.warn({ lost }, 'a spec.verify call got no answer from a lost sandbox: the finalize is retried');
  throw new SandboxError('TIMEOUT', `${timeout.message}; the sandbox is lost: ${lost}`, { cause: timeout });
}
