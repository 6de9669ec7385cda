// Reads a team's settings from its Namespace's annotations (reconcile/namespace-policy.ts) for
// admission and for the step workers. One GET per namespace at most every few seconds: many
// runs of a namespace are admitted and stepped at once, and an admin's change to the
// annotations may take that long to apply. A GET rather than a watch keeps the operator's
// rights to `get` on the namespaces it serves (a Role can grant it on its own namespace).
// Entries past their TTL are dropped (at most one sweep per TTL): a read of them would go to the
// API server anyway, and namespaces made per pull request would otherwise each keep one for good.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { readNamespacePolicy, type NamespacePolicy } from '../reconcile/namespace-policy.ts';
import { isNotFound } from './api-errors.ts';

/** How long a namespace's policy is reused before it is read again. */
export const NAMESPACE_POLICY_TTL_MS = 5_000;

export interface NamespacePolicyReader {
  policyOf(namespace: string): Promise<NamespacePolicy>;
}

export interface CachedNamespacePolicyReader extends NamespacePolicyReader {
  /** How many namespaces' policies are kept: at most those read within about two TTLs. */
  readonly cachedNamespaces: number;
}

export function cachedNamespacePolicyReader(
  read: (namespace: string) => Promise<Record<string, string> | undefined>,
  now: () => number = Date.now,
): CachedNamespacePolicyReader {
  const cache = new Map<string, { at: number; policy: Promise<NamespacePolicy> }>();
  let sweptAt = 0;
  const forgetExpired = (time: number) => {
    if (time - sweptAt < NAMESPACE_POLICY_TTL_MS) return;
    sweptAt = time;
    for (const [namespace, entry] of cache) if (time - entry.at >= NAMESPACE_POLICY_TTL_MS) cache.delete(namespace);
  };
  return {
    get cachedNamespaces() {
      return cache.size;
    },
    policyOf(namespace) {
      const time = now();
      forgetExpired(time);
      const cached = cache.get(namespace);
      if (cached && time - cached.at < NAMESPACE_POLICY_TTL_MS) return cached.policy;
      const policy = read(namespace).then(readNamespacePolicy);
      const entry = { at: time, policy };
      // A failed read is not kept: the next caller asks again (and the reconcile that failed retries).
      // Only this read's entry: a newer one, read since, stays.
      policy.catch(() => cache.get(namespace) === entry && cache.delete(namespace));
      cache.set(namespace, entry);
      return policy;
    },
  };
}

export function kubernetesNamespacePolicyReader(kubeConfig: KubeConfig): NamespacePolicyReader {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  return cachedNamespacePolicyReader(async (name) => {
    try {
      return (await core.readNamespace({ name })).metadata?.annotations ?? {};
    } catch (error) {
      // A namespace gone with its runs: nothing of its own applies.
      if (isNotFound(error)) return undefined;
      throw error;
    }
  });
}
