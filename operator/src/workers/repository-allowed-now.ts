// allowRepo as it is now, for a worker about to use the run's repository long after the run was
// admitted: the cluster's list (the config), then the namespace's, which a cluster admin may
// have narrowed since (its chamvi.dev/allow-repo annotation, namespace-policy.ts). A publish
// that waited days for its approval pushed to a repository the namespace had been taken off.
// The URL git gets is the one the cluster's list checked (security #11.2).
import type { NamespacePolicyReader } from '../kube/namespace-policy-reader.ts';
import { narrowedListRefusal } from '../reconcile/namespace-policy.ts';
import { isRepositoryAllowed, type RepoDecision } from '../reconcile/allow-repo.ts';

export async function repositoryAllowedNow(
  deps: { clonePolicy: { allowRepo: readonly string[] }; namespacePolicies?: NamespacePolicyReader },
  namespace: string,
  url: string,
): Promise<RepoDecision> {
  const cluster = isRepositoryAllowed(url, deps.clonePolicy.allowRepo);
  if (!cluster.allowed || !deps.namespacePolicies) return cluster;
  const narrowed = (await deps.namespacePolicies.policyOf(namespace)).allowRepo;
  if (narrowed === undefined) return cluster;
  const team = isRepositoryAllowed(url, narrowed);
  if (team.allowed) return cluster;
  return { allowed: false, message: narrowedListRefusal(namespace, 'allowRepo', team.message) };
}
