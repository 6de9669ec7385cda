// Where sandbox pods run: the operator config's sandboxPlacement (nodeSelector, tolerations,
// runtimeClassName, priorityClassName) as a pod-spec fragment. Sandbox pods and isolation
// probe pods both take it, so a probe's verdict comes from the nodes the sandboxes land on.
// A run's own spec.sandbox.runtimeClassName wins over the configured default, where the admin
// allows it (allow-runtime-class.ts, checked when the run is accepted and admitted).
import type { V1PodSpec } from '@kubernetes/client-node';
import type { OperatorConfig } from '../config/operator-config.ts';

export type SandboxPlacementSpec = Pick<V1PodSpec, 'nodeSelector' | 'tolerations' | 'runtimeClassName' | 'priorityClassName'>;

export function sandboxPlacementSpec(placement: OperatorConfig['sandboxPlacement'], runRuntimeClassName?: string): SandboxPlacementSpec {
  const runtimeClassName = runRuntimeClassName ?? placement.runtimeClassName;
  return {
    ...(Object.keys(placement.nodeSelector).length > 0 ? { nodeSelector: { ...placement.nodeSelector } } : {}),
    ...(placement.tolerations.length > 0 ? { tolerations: placement.tolerations.map((toleration) => ({ ...toleration })) } : {}),
    ...(runtimeClassName ? { runtimeClassName } : {}),
    ...(placement.priorityClassName ? { priorityClassName: placement.priorityClassName } : {}),
  };
}
