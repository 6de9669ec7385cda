// Which RuntimeClass a run's sandbox may ask for (spec.sandbox.runtimeClassName). An admin's
// sandboxPlacement.runtimeClassName (gvisor, kata) is the sandbox's isolation boundary: a run
// that named another (runc, or any class the cluster has, whose scheduling may also put the pod
// on other nodes) stepped out of it. So a run may name only the admin's default, a warm pool's
// class, or one in allowRuntimeClasses. Pure.
import type { OperatorConfig } from '../config/operator-config.ts';

export type RuntimeClassConfig = Pick<OperatorConfig, 'allowRuntimeClasses' | 'sandboxPlacement' | 'warmPools'>;

export function isRuntimeClassAllowed(
  name: string | undefined,
  config: RuntimeClassConfig,
): { allowed: true } | { allowed: false; message: string } {
  const allowed = new Set(
    [
      config.sandboxPlacement.runtimeClassName,
      ...config.warmPools.map((pool) => pool.runtimeClassName),
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
