// The Kubernetes Sandbox: the run's sandbox pod reached through pods/exec, per call or as a
// kept serve session (one per pod, started again when it drops). The toolbox finds its
// workspace and home through the pod's CHAMVI_WORKSPACE / CHAMVI_HOME, so no paths are passed.
import type { KubeConfig } from '@kubernetes/client-node';
import { KubernetesExecTransport } from './kubernetes-exec-transport.ts';
import { ToolboxSandbox, type ToolboxSandboxMode } from './toolbox-sandbox.ts';

export interface KubernetesSandboxOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  podName: string;
  /** The sandbox pod's container (SANDBOX_CONTAINER). */
  container: string;
  toolboxCommand: readonly string[];
  /** Exec only into a pod this CodingRun controls (KubernetesExecTransportOptions.expectedOwnerUid). */
  expectedOwnerUid?: string;
  mode: ToolboxSandboxMode;
  maxResponseBytes?: number;
  defaultTimeoutMs?: number;
  connectTimeoutMs?: number;
  keepAliveIntervalMs?: number;
}

export function createKubernetesSandbox(options: KubernetesSandboxOptions): ToolboxSandbox {
  const transport = new KubernetesExecTransport({
    kubeConfig: options.kubeConfig,
    namespace: options.namespace,
    podName: options.podName,
    container: options.container,
    toolboxCommand: options.toolboxCommand,
    ...(options.expectedOwnerUid === undefined ? {} : { expectedOwnerUid: options.expectedOwnerUid }),
    ...(options.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: options.connectTimeoutMs }),
    ...(options.keepAliveIntervalMs === undefined ? {} : { keepAliveIntervalMs: options.keepAliveIntervalMs }),
  });
  return new ToolboxSandbox(transport, {
    mode: options.mode,
    ...(options.maxResponseBytes === undefined ? {} : { maxResponseBytes: options.maxResponseBytes }),
    ...(options.defaultTimeoutMs === undefined ? {} : { defaultTimeoutMs: options.defaultTimeoutMs }),
  });
}
