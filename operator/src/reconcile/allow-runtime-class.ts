// Which RuntimeClass a run's sandbox may ask for (spec.sandbox.runtimeClassName). An admin's
// sandboxPlacement.runtimeClassName (gvisor, kata) is the sandbox's isolation boundary: a run
// that named another (runc, or any class the cluster has, whose scheduling may also put the pod
// on other nodes) stepped out of it. So a run may name only the admin's default, the class of
// a warm pool in the run's own namespace (the pools an admin set up there), or one in
// allowRuntimeClasses. A pool's class counted in every namespace: a pool on runc in team-a let
// any run in team-b ask for runc, out of the default gVisor. Pure.
import type { OperatorConfig } from '../config/operator-config.ts';

export type RuntimeClassConfig = Pick<OperatorConfig, 'allowRuntimeClasses' | 'sandboxPlacement' | 'warmPools'>;

export function isRuntimeClassAllowed(
  name: string | undefined,
  config: RuntimeClassConfig,
  namespace: string,
): { allowed: true } | { allowed: false; message: string } {
  const allowed = new Set(
    [
      config.sandboxPlacement.runtimeClassName,
      ...config.warmPools.filter((pool) => pool.namespace === namespace).map((pool) => pool.runtimeClassName),
      ...config.allowRuntimeClasses,
    ].filter((allowedName) => allowedName !== undefined),
  );
  if (name === undefined || allowed.has(name)) return { allowed: true };
  const others = allowed.size === 0 ? 'none' : [...allowed].sort().join(', ');
  return {
    allowed: false,
    message:
      `spec.sandbox.runtimeClassName ${JSON.stringify(name)} is not allowed (allowed: ${others}); ` +
      "leave it out for the operator's sandbox runtime, name an allowed one, or ask an admin to add it to allowRuntimeClasses",
  };
}
