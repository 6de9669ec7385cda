// The controller's only door to the API server: every write and every uncached read it
// makes. A thin adapter over client-node (every step's status patch over the lighter
// json-requests.ts), so the reconciler reads as a list of intentions and the RBAC the chart
// grants can be read off this one file.
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Event,
  type V1NetworkPolicy,
  type V1ObjectMeta,
  type V1Pod,
} from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION, type CodingRun, type CodingRunStatus } from '../api/index.ts';
import { isAlreadyExists, isConflict, isNotFound } from './api-errors.ts';
import { JSON_PATCH, jsonRequests } from './json-requests.ts';
import {
  FINISHED_RUNS_CONFIG_MAP,
  ForeignFinishedRunsError,
  isFinishedRunsData,
  withFinishedRun,
  type FinishedRunRecord,
} from '../reconcile/finished-runs.ts';

export interface KubeGateway {
  getRun(namespace: string, name: string): Promise<CodingRun | undefined>;
  /** Replaces the status; fails with 409 when `run.metadata.resourceVersion` is stale. */
  replaceRunStatus(run: CodingRun, status: CodingRunStatus): Promise<CodingRun>;
  /**
   * Applies a JSON Patch to the status subresource in one round trip; `test` operations in
   * it make the API server refuse (422) when the run is not what the caller expects.
   */
  patchRunStatus(namespace: string, name: string, operations: object[]): Promise<CodingRun>;
  /** Sets the finalizers, guarded by the run's resourceVersion. */
  setRunFinalizers(run: CodingRun, finalizers: string[]): Promise<CodingRun>;
  /**
   * Deletes the run with this uid (a precondition): a run at the name with another uid, made
   * again since the caller looked, is a 409 and stays (goneUnlessSame). Gone already is fine.
   */
  deleteRun(namespace: string, name: string, uid: string): Promise<void>;
  /** Keeps a TTL-deleted run's record in the namespace's chamvi-finished-runs ConfigMap (reconcile/finished-runs.ts). */
  recordFinishedRun(namespace: string, name: string, record: FinishedRunRecord): Promise<void>;
  /**
   * Creates the pod: its answer is the pod as admitted (mutating webhooks' changes in). When
   * its name is already held, returns the holder (its metadata) for the caller to check who
   * owns it: a name is not an identity.
   */
  createPod(pod: V1Pod): Promise<CreateAnswer<V1Pod>>;
  /** As deleteRun, by the pod's uid when the caller saw the pod (a 409 when another holds the name); else by name alone. */
  deletePod(namespace: string, name: string, uid?: string): Promise<void>;
  /** As createPod, but the holder comes whole: whether it is the policy wanted is in its spec. */
  createNetworkPolicy(policy: V1NetworkPolicy): Promise<V1NetworkPolicy | undefined>;
  /** Replaces a policy; `policy.metadata.resourceVersion` is the version replaced (a 409 when it moved). */
  replaceNetworkPolicy(policy: V1NetworkPolicy): Promise<void>;
  /**
   * As deletePod: by the policy's uid when the caller saw it (a 409 when another holds the name,
   * made again since: anyone who may create NetworkPolicies in the namespace may do that).
   */
  deleteNetworkPolicy(namespace: string, name: string, uid?: string): Promise<void>;
  /**
   * As deletePod: by the ConfigMap's uid when the caller saw it (a 409 when another holds the
   * name, made again since: anyone who may create ConfigMaps in the namespace may do that).
   */
  deleteConfigMap(namespace: string, name: string, uid?: string): Promise<void>;
  /** Keys and labels of a Secret (values are never kept), or undefined when it does not exist. */
  secretKeysAndLabels(namespace: string, name: string): Promise<SecretKeysAndLabels | undefined>;
  configMapKeys(namespace: string, name: string): Promise<string[] | undefined>;
  createEvent(event: CoreV1Event): Promise<void>;
}

/** What validation learns of a referenced Secret: its keys and labels (security #11.3: the usable-by-runs label). */
export interface SecretKeysAndLabels {
  keys: string[];
  labels: Record<string, string>;
}

/** The object found holding a name the operator meant to create: what ownership is judged by. */
export interface NameHolder {
  metadata: Pick<V1ObjectMeta, 'name' | 'namespace' | 'uid' | 'labels' | 'ownerReferences'>;
}

/** A create's answer: the object as stored, or the holder of its name (undefined: gone again since). */
export type CreateAnswer<T> = { created: T } | { holder: NameHolder | undefined };

const ignore = (test: (error: unknown) => boolean) => (error: unknown) => {
  if (!test(error)) throw error;
};

/** DeleteOptions that delete only the object with this uid (none: whatever holds the name). */
export const onlyUid = (uid: string | undefined) => (uid ? { body: { preconditions: { uid } } } : {});

/**
 * A delete guarded by a uid precondition (onlyUid): the API server answers 409 when the name is
 * held by another object, deleted and created again since the caller looked. The one meant is
 * gone, which is what the delete was for, and the other is not the caller's to delete.
 */
export async function goneUnlessSame(deleting: Promise<void>): Promise<void> {
  await deleting.catch(ignore(isConflict));
}

/** Runs create; on AlreadyExists reads who holds the name (gone again by then: undefined, and the next reconcile creates it). */
async function createOrFindHolder<T>(create: () => Promise<T>, read: () => Promise<{ metadata?: V1ObjectMeta }>): Promise<CreateAnswer<T>> {
  try {
    return { created: await create() };
  } catch (error) {
    if (!isAlreadyExists(error)) throw error;
  }
  try {
    const { name, namespace, uid, labels, ownerReferences } = (await read()).metadata ?? {};
    return { holder: { metadata: { name, namespace, uid, labels, ownerReferences } } };
  } catch (error) {
    if (isNotFound(error)) return { holder: undefined };
    throw error;
  }
}

export function createKubeGateway(kubeConfig: KubeConfig): KubeGateway {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const networking = kubeConfig.makeApiClient(NetworkingV1Api);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const json = jsonRequests(kubeConfig);
  const runPath = (namespace: string, name: string) => ({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name });
  const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

  return {
    async getRun(namespace, name) {
      try {
        return (await custom.getNamespacedCustomObject(runPath(namespace, name))) as CodingRun;
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    async replaceRunStatus(run, status) {
      const body = { apiVersion: run.apiVersion, kind: run.kind, metadata: run.metadata, spec: run.spec, status };
      return (await custom.replaceNamespacedCustomObjectStatus({
        ...runPath(run.metadata.namespace, run.metadata.name),
        body,
      })) as CodingRun;
    },
    async patchRunStatus(namespace, name, operations) {
      // Every step's progress: the lighter client (json-requests.ts).
      const path = `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/${PLURAL}/${encodeURIComponent(name)}/status`;
      return json.send<CodingRun>('PATCH', path, operations, JSON_PATCH);
    },
    async setRunFinalizers(run, finalizers) {
      const body = { metadata: { finalizers, resourceVersion: run.metadata.resourceVersion } };
      return (await custom.patchNamespacedCustomObject(
        { ...runPath(run.metadata.namespace, run.metadata.name), body },
        mergePatch,
      )) as CodingRun;
    },
    async deleteRun(namespace, name, uid) {
      await custom.deleteNamespacedCustomObject({ ...runPath(namespace, name), ...onlyUid(uid) }).catch(ignore(isNotFound));
    },
    async recordFinishedRun(namespace, name, record) {
      // Read, change, replace guarded by the resourceVersion; a conflict (another run's record) starts over.
      for (let attempt = 1; ; attempt++) {
        try {
          const current = await core.readNamespacedConfigMap({ namespace, name: FINISHED_RUNS_CONFIG_MAP }).catch((error: unknown) => {
            if (isNotFound(error)) return undefined;
            throw error;
          });
          if (current && !isFinishedRunsData(current.data))
            throw new ForeignFinishedRunsError(namespace, Object.keys(current.data ?? {}).length);
          const data = withFinishedRun(current?.data, name, record);
          if (!current) {
            const metadata = {
              name: FINISHED_RUNS_CONFIG_MAP,
              namespace,
              labels: { 'app.kubernetes.io/managed-by': 'chamvi-operator', 'app.kubernetes.io/component': 'finished-runs' },
            };
            await core.createNamespacedConfigMap({ namespace, body: { metadata, data } });
          } else {
            await core.replaceNamespacedConfigMap({ namespace, name: FINISHED_RUNS_CONFIG_MAP, body: { ...current, data } });
          }
          return;
        } catch (error) {
          if (!(isConflict(error) || isAlreadyExists(error)) || attempt >= 5) throw error;
        }
      }
    },
    async createPod(pod) {
      const { namespace, name } = pod.metadata as { namespace: string; name: string };
      return createOrFindHolder(
        () => core.createNamespacedPod({ namespace, body: pod }),
        () => core.readNamespacedPod({ namespace, name }),
      );
    },
    async deletePod(namespace, name, uid) {
      await core.deleteNamespacedPod({ namespace, name, ...onlyUid(uid) }).catch(ignore(isNotFound));
    },
    async createNetworkPolicy(policy) {
      const { namespace, name } = policy.metadata as { namespace: string; name: string };
      try {
        await networking.createNamespacedNetworkPolicy({ namespace, body: policy });
        return undefined;
      } catch (error) {
        if (!isAlreadyExists(error)) throw error;
      }
      return networking.readNamespacedNetworkPolicy({ namespace, name }).catch((error: unknown) => {
        if (isNotFound(error)) return undefined;
        throw error;
      });
    },
    async replaceNetworkPolicy(policy) {
      const { namespace, name } = policy.metadata as { namespace: string; name: string };
      await networking.replaceNamespacedNetworkPolicy({ namespace, name, body: policy });
    },
    async deleteNetworkPolicy(namespace, name, uid) {
      await networking.deleteNamespacedNetworkPolicy({ namespace, name, ...onlyUid(uid) }).catch(ignore(isNotFound));
    },
    async deleteConfigMap(namespace, name, uid) {
      await core.deleteNamespacedConfigMap({ namespace, name, ...onlyUid(uid) }).catch(ignore(isNotFound));
    },
    async secretKeysAndLabels(namespace, name) {
      try {
        const secret = await core.readNamespacedSecret({ namespace, name });
        return { keys: Object.keys({ ...secret.data, ...secret.stringData }), labels: secret.metadata?.labels ?? {} };
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    async configMapKeys(namespace, name) {
      try {
        const configMap = await core.readNamespacedConfigMap({ namespace, name });
        return Object.keys({ ...configMap.data, ...configMap.binaryData });
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    async createEvent(event) {
      await core.createNamespacedEvent({ namespace: event.metadata!.namespace!, body: event });
    },
  };
}
