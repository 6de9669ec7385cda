// What a run does after its claim of a warm pool pod got no answer (a timeout, a 504, an etcd
// timeout: any 5xx but an admission webhook's failure) and the pod read back is not the run's:
// the patch may still commit later. Retried as it was (the reconcile failed), a 5xx that lasts
// kept the run in its phase, its slot held, for as long as it lasted; taken as refused, a late
// commit left the run with two sandboxes. So the claim is fenced off instead: the pool pod is
// deleted as the claim judged it (its uid and resourceVersion as preconditions). Every claim
// patch tests that resourceVersion (reconcile/warm-pool.ts claimPatch) and that the pod is not
// being deleted, and the API server applies a patch and a delete one at a time, so:
// - the delete went through (or the pod is gone, or changed since: a 404 or 409, which the
//   gateway takes as done): no claim judged on that pod can apply any more, and the run takes
//   a fresh pod at once; the pool makes another;
// - the claim came first: the delete's precondition fails (409), and the pod read again is the
//   run's, which goes on in it;
// - the delete or the read gets no answer either: it throws, and the reconcile is retried, as
//   before (the API server then writes nothing, a fresh pod's create included).
import type { V1Pod } from '@kubernetes/client-node';
import type { WarmPoolGateway } from '../kube/warm-pool-gateway.ts';

/** The claim landed after all (the pod as read now), or it never can (fenced): the run takes a fresh pod. */
export type FencedClaim = { claimed: V1Pod } | { fenced: true };

/**
 * Fences off the claim of `seen` (the pool pod as the claim judged it) whose answer was lost:
 * after this resolves, either the claim is known to have landed, or no claim patch judged on
 * `seen` can land any more. `isClaimedForRun` says whether the pod read back is the claim landed:
 * `seen` itself (its uid) with the claim's seal for the run, never a pod that only carries the
 * run's labels and a copied controller ownerReference (anyone who may create or patch pods can
 * put those there, at this name too once the pool pod is gone).
 */
export async function fenceUnansweredClaim(
  gateway: Pick<WarmPoolGateway, 'deletePod' | 'readPod'>,
  seen: V1Pod,
  isClaimedForRun: (pod: V1Pod) => boolean,
): Promise<FencedClaim> {
  const namespace = seen.metadata!.namespace!;
  const name = seen.metadata!.name!;
  const uid = seen.metadata?.uid;
  const resourceVersion = seen.metadata?.resourceVersion;
  // Without both preconditions the delete could reach a pod the claim made the run's: not fenced.
  if (uid === undefined || resourceVersion === undefined)
    throw new Error(`cannot fence off the claim of warm pool pod ${namespace}/${name}: it has no uid or resourceVersion`);
  await gateway.deletePod(namespace, name, { uid, resourceVersion });
  const now = await gateway.readPod(namespace, name);
  return now !== undefined && isClaimedForRun(now) ? { claimed: now } : { fenced: true };
}
