// Deterministic names for what the operator creates for a run. Deterministic, so a retried
// or restarted reconcile finds (or collides with) the object it created before instead of
// making a second one.
import { createHash } from 'node:crypto';

const MAX_NAME = 63; // pod names become hostnames; keep every name a DNS label

function withSuffix(runName: string, suffix: string): string {
  const name = `${runName}-${suffix}`;
  if (name.length <= MAX_NAME) return name;
  // Long run names are cut and disambiguated by a hash of the full name.
  const hash = createHash('sha256').update(runName).digest('hex').slice(0, 8);
  const keep = MAX_NAME - suffix.length - hash.length - 2;
  return `${runName.slice(0, keep).replace(/[-.]+$/, '')}-${hash}-${suffix}`;
}

export const sandboxPodName = (runName: string) => withSuffix(runName, 'sandbox');
export const networkPolicyName = (runName: string) => withSuffix(runName, 'sandbox');
export const diffConfigMapName = (runName: string) => withSuffix(runName, 'diff');
