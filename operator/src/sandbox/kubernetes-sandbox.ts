// The Kubernetes Sandbox: the run's sandbox pod reached through pods/exec, per call or as a
// kept serve session (one per pod, started again when it drops). The toolbox finds its
// workspace and home through the pod's CHAMVI_WORKSPACE / CHAMVI_HOME, so no paths are passed.
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { WARM_POOL_LABEL } from '../reconcile/warm-pool.ts';
import { KubernetesExecTransport, type KubernetesExecTransportOptions } from './kubernetes-exec-transport.ts';
import { SandboxError } from './sandbox-error.ts';
import { ToolboxSandbox, type ToolboxSandboxMode } from './toolbox-sandbox.ts';
import type { WarmSessionStarter } from './warm-sessions.ts';

export interface KubernetesSandboxOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  podName: string;
  /** The sandbox pod's container (SANDBOX_CONTAINER). */
  container: string;
  toolboxCommand: readonly string[];
  /** Exec only into a pod this CodingRun controls (KubernetesExecTransportOptions.expectedOwnerUid). */
  expectedOwnerUid?: string;
  /** Exec only into a pod that carries nothing the operator did not put there (KubernetesExecTransportOptions.expectedPodShape). */
  expectedPodShape?: KubernetesExecTransportOptions['expectedPodShape'];
  /** The run's record of its pod's images, where expectedPodShape lacks it (KubernetesExecTransportOptions.readAdmittedImages). */
  readAdmittedImages?: KubernetesExecTransportOptions['readAdmittedImages'];
  mode: ToolboxSandboxMode;
  maxResponseBytes?: number;
  defaultTimeoutMs?: number;
  connectTimeoutMs?: number;
  keepAliveIntervalMs?: number;
  /** Sessions opened ahead into warm pool pods, one of which the first session may be. */
  warmSessions?: KubernetesExecTransportOptions['warmSessions'];
}

export function createKubernetesSandbox(options: KubernetesSandboxOptions): ToolboxSandbox {
  const transport = new KubernetesExecTransport({
    kubeConfig: options.kubeConfig,
    namespace: options.namespace,
    podName: options.podName,
    container: options.container,
    toolboxCommand: options.toolboxCommand,
    ...(options.expectedOwnerUid === undefined ? {} : { expectedOwnerUid: options.expectedOwnerUid }),
    ...(options.expectedPodShape === undefined ? {} : { expectedPodShape: options.expectedPodShape }),
    ...(options.readAdmittedImages === undefined ? {} : { readAdmittedImages: options.readAdmittedImages }),
    ...(options.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: options.connectTimeoutMs }),
    ...(options.keepAliveIntervalMs === undefined ? {} : { keepAliveIntervalMs: options.keepAliveIntervalMs }),
    ...(options.warmSessions === undefined ? {} : { warmSessions: options.warmSessions }),
  });
  return new ToolboxSandbox(transport, {
    mode: options.mode,
    ...(options.maxResponseBytes === undefined ? {} : { maxResponseBytes: options.maxResponseBytes }),
    ...(options.defaultTimeoutMs === undefined ? {} : { defaultTimeoutMs: options.defaultTimeoutMs }),
  });
}

/**
 * Opens `toolbox serve` in a warm pool pod for warm-sessions.ts, once a read shows the pod by
 * that name is still the one the pool loop saw (its uid) and still in a pool: no exec into a
 * pod that replaced it. No run's data is sent; the run's own check comes when it takes the session.
 */
export function warmSessionStarter(options: {
  kubeConfig: KubeConfig;
  container: string;
  toolboxCommand: readonly string[];
  readPod?: (namespace: string, name: string) => Promise<V1Pod>;
}): WarmSessionStarter {
  const readPod =
    options.readPod ??
    ((namespace: string, name: string) => options.kubeConfig.makeApiClient(CoreV1Api).readNamespacedPod({ namespace, name }));
  return async (pod) => {
    const live = await readPod(pod.namespace, pod.name);
    if (live.metadata?.uid !== pod.uid || !live.metadata?.labels?.[WARM_POOL_LABEL] || live.metadata.deletionTimestamp) {
      throw new SandboxError('TRANSPORT', `pod ${pod.namespace}/${pod.name} is no longer the warm pool pod ${pod.uid}`);
    }
    const transport = new KubernetesExecTransport({
      kubeConfig: options.kubeConfig,
      namespace: pod.namespace,
      podName: pod.name,
      container: options.container,
      toolboxCommand: options.toolboxCommand,
    });
    return transport.start(['serve']);
  };
}
