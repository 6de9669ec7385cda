// The warm pools' door to the API server: create a pool pod (a generated name), claim one
// for a run (one JSON Patch the API server applies atomically), delete one. Its own small
// interface beside KubeGateway, so a pool-less build (the CLI's local mode) implements nothing.
import { CoreV1Api, NetworkingV1Api, type KubeConfig, type V1NetworkPolicy, type V1Pod } from '@kubernetes/client-node';
import { isAlreadyExists, isNotFound, statusCodeOf, unlessNotFound } from './api-errors.ts';

export interface WarmPoolGateway {
  createPoolPod(pod: V1Pod): Promise<V1Pod>;
  /**
   * Applies a claim patch (reconcile/warm-pool.ts claimPatch). The claimed pod, or undefined
   * when the claim lost: one of its tests failed (another claim took the pod, or it changed, 422)
   * or the pod was gone (404). Any other failure is thrown as it came: the caller reads the pod
   * to learn whether the claim landed, and a run whose claim was refused (a webhook's 403 or
   * 500) takes a fresh pod (run-reconciler.ts claimWarmPod).
   */
  claimPod(namespace: string, name: string, patch: object[]): Promise<V1Pod | undefined>;
  /** The pod as the API server has it now (undefined: gone): what a claim whose answer was lost did. */
  readPod(namespace: string, name: string): Promise<V1Pod | undefined>;
  /**
   * Deletes a pool pod as the cache showed it (`seen`: its uid and resourceVersion, as
   * preconditions). A pod changed since is left alone (409): a claim another replica made
   * (a leader hand-over) changed it, and the next pass judges it again.
   */
  deletePod(namespace: string, name: string, seen?: { uid?: string; resourceVersion?: string }): Promise<void>;
  /** Creates a pool's deny-all NetworkPolicy; when its name is taken, the policy that holds it (for the caller to judge). */
  createPoolNetworkPolicy(policy: V1NetworkPolicy): Promise<V1NetworkPolicy>;
}

export function kubernetesWarmPoolGateway(kubeConfig: KubeConfig): WarmPoolGateway {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const networking = kubeConfig.makeApiClient(NetworkingV1Api);
  return {
    async createPoolNetworkPolicy(policy) {
      const { namespace, name } = policy.metadata as { namespace: string; name: string };
      try {
        return await networking.createNamespacedNetworkPolicy({ namespace, body: policy });
      } catch (error) {
        if (!isAlreadyExists(error)) throw error;
        return networking.readNamespacedNetworkPolicy({ namespace, name });
      }
    },
    async createPoolPod(pod) {
      return core.createNamespacedPod({ namespace: pod.metadata!.namespace!, body: pod });
    },
    async claimPod(namespace, name, patch) {
      try {
        // client-node sends a patch as JSON Patch by default: its `test` is what makes the claim exclusive.
        return await core.patchNamespacedPod({ namespace, name, body: patch });
      } catch (error) {
        if (statusCodeOf(error) === 422 || isNotFound(error)) return undefined;
        throw error;
      }
    },
    readPod: (namespace, name) => unlessNotFound(core.readNamespacedPod({ namespace, name })),
    async deletePod(namespace, name, seen) {
      try {
        await core.deleteNamespacedPod({ namespace, name, ...(seen ? { body: { preconditions: seen } } : {}) });
      } catch (error) {
        if (!isNotFound(error) && statusCodeOf(error) !== 409) throw error;
      }
    },
  };
}
