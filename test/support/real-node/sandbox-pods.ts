// The operator's own sandbox pod (reconcile/sandbox-pod.ts) for a
// CodingRun that does not exist, placed on the real node with sandboxPlacement, for the
// real-node tests and benchmark that use the pod without an operator. Owner references are
// removed: with no CodingRun object the garbage collector would delete them at once.
import type { V1Pod } from '@kubernetes/client-node';
import { codingRunSpec, type ParsedCodingRun } from '../../../operator/src/api/index.ts';
import { loadOperatorConfig, type OperatorConfig } from '../../../operator/src/config/operator-config.ts';
import { buildSandboxPod } from '../../../operator/src/reconcile/sandbox-pod.ts';
import { realNodeLabel, realNodeTaint } from './real-node.ts';

/** Small, so many fit on the node; 256Mi is the limit the OOM checks push past. */
export const realNodeSandboxResources = {
  requests: { cpu: '50m', memory: '64Mi' },
  limits: { cpu: '1', memory: '256Mi', 'ephemeral-storage': '1Gi' },
} as const;

/** The operator's placement for the real node, as a real-node deployment would set it. */
export const realNodePlacement = {
  nodeSelector: { [realNodeLabel.key]: realNodeLabel.value },
  tolerations: [{ key: realNodeTaint.key, operator: 'Equal' as const, value: realNodeTaint.value, effect: realNodeTaint.effect }],
};

export function realNodeOperatorConfig(sandboxImage: string): OperatorConfig {
  return loadOperatorConfig({ sandboxImage, sandboxPlacement: realNodePlacement }, {});
}

/** A parsed CodingRun named `name` in `namespace`: only what the pod builders read matters. */
export function probeRun(namespace: string, name: string, uid: string): ParsedCodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name, namespace, uid },
    spec: codingRunSpec.parse({
      task: 'probe',
      repository: { url: 'https://github.com/acme/x' },
      model: { provider: 'scripted', scriptRef: { name: 's' } },
      budget: { timeout: '10m' },
      sandbox: { resources: realNodeSandboxResources },
    }),
  };
}

function unowned<T extends { metadata?: { ownerReferences?: unknown } }>(object: T): T {
  delete object.metadata!.ownerReferences;
  return object;
}

/** The sandbox pod the operator would create for run `name`, on the real node, with no owner. */
export function realNodeSandboxPod(namespace: string, name: string, uid: string, sandboxImage: string): V1Pod {
  return unowned(buildSandboxPod(probeRun(namespace, name, uid), realNodeOperatorConfig(sandboxImage)));
}
