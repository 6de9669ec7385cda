// The cluster objects a worker reads or writes for a run: the API key and git token
// (read for each use, never stored), the scripted model's ConfigMap, and the ConfigMap
// that keeps the full diff (its format: reconcile/diff-config-map.ts). Only ever in the run's
// own namespace.
import { CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { RUN_UID_LABEL, type ParsedCodingRun } from '../api/index.ts';
import { isAlreadyExists, isNotFound, statusCodeOf } from '../kube/api-errors.ts';
import { JSON_PATCH, jsonRequests } from '../kube/json-requests.ts';
import { buildDiffConfigMap, decodeDiff, encodeDiff, type DiffConfigMap } from '../reconcile/diff-config-map.ts';
import { labelPointer } from '../reconcile/json-pointer.ts';
import { diffConfigMapName } from '../reconcile/names.ts';
import { MANAGED_BY, MANAGED_BY_LABEL, isOwnedByRun } from '../reconcile/ownership.ts';
import { isSecretUsableByRuns, secretNotUsableMessage } from '../reconcile/secret-opt-in.ts';
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';

export interface RunResources {
  /** The value, undefined when the Secret or key is missing; throws a RunFailure (SecretNotAllowed) when the Secret is not labelled usable-by-runs. */
  secretValue(namespace: string, name: string, key: string): Promise<string | undefined>;
  configMapValue(namespace: string, name: string, key: string): Promise<string | undefined>;
  /**
   * Creates or replaces (only its own) the run's diff ConfigMap; returns the name it is under:
   * the derived name, or one the API server made up when someone else's object holds that.
   * `written`: where this run's diff went last time (a step's snapshot), tried first.
   */
  writeDiff(run: ParsedCodingRun, diff: string, written?: string): Promise<string>;
  /** The diff last written for the run (a snapshot after a step, or the final one) and where, when there is one of its own. */
  readDiff(run: ParsedCodingRun): Promise<{ configMap: string; diff: string } | undefined>;
  /** A diff ConfigMap as stored (spec.continueFrom reads the source run's), undefined when missing. */
  readDiffConfigMap(namespace: string, name: string): Promise<DiffConfigMap | undefined>;
}

/** Replaces `current` with `next`'s content, only if it is still the version read (else 409). */
async function replaceGuarded(core: CoreV1Api, current: V1ConfigMap, next: V1ConfigMap): Promise<string> {
  const { name, namespace, resourceVersion } = current.metadata as { name: string; namespace: string; resourceVersion: string };
  await core.replaceNamespacedConfigMap({ namespace, name, body: { ...next, metadata: { ...next.metadata, name, resourceVersion } } });
  return name;
}

/**
 * The JSON Patch that puts `diff` into a ConfigMap only while it is the run's own: the tests
 * are isOwnedByRun's checks (the operator's label, the run-uid label, the run as controller),
 * made by the API server on the object it writes, so no read before it is needed. The
 * payload key the diff does not use is emptied, so an earlier form of it cannot be read.
 */
function diffPatch(run: ParsedCodingRun, diff: string): object[] {
  const { data = {}, binaryData = {} } = encodeDiff(diff);
  const uid = run.metadata.uid;
  return [
    { op: 'test', path: labelPointer(MANAGED_BY_LABEL), value: MANAGED_BY },
    { op: 'test', path: labelPointer(RUN_UID_LABEL), value: uid },
    { op: 'test', path: '/metadata/ownerReferences/0/uid', value: uid },
    { op: 'test', path: '/metadata/ownerReferences/0/controller', value: true },
    { op: 'add', path: '/data', value: data },
    { op: 'add', path: '/binaryData', value: binaryData },
  ];
}

export function kubernetesRunResources(kubeConfig: KubeConfig): RunResources {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const json = jsonRequests(kubeConfig);
  return {
    async secretValue(namespace, name, key) {
      try {
        const secret = await core.readNamespacedSecret({ namespace, name });
        // Security #11.3: the label is checked on the very object whose value is used; the
        // admission check saw an earlier read, and the label may have gone since.
        if (!isSecretUsableByRuns(secret.metadata?.labels))
          throw new RunFailure(REASONS.SecretNotAllowed, secretNotUsableMessage(namespace, name, 'the run'));
        const value = secret.data?.[key];
        return value === undefined ? secret.stringData?.[key] : Buffer.from(value, 'base64').toString('utf8');
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    async configMapValue(namespace, name, key) {
      try {
        return (await core.readNamespacedConfigMap({ namespace, name })).data?.[key];
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    async readDiff(run) {
      const namespace = run.metadata.namespace;
      const name = diffConfigMapName(run);
      let found = await core
        .readNamespacedConfigMap({ namespace, name })
        .catch((error: unknown) => (isNotFound(error) ? undefined : Promise.reject(error)));
      if (found && !isOwnedByRun(found, run)) {
        // Squatted: writeDiff put it under a name the API server made up (see below).
        found = (await core.listNamespacedConfigMap({ namespace, labelSelector: `${RUN_UID_LABEL}=${run.metadata.uid}` })).items.find(
          (configMap) => configMap.metadata?.name?.startsWith(`${name}-`) && isOwnedByRun(configMap, run),
        );
      }
      const diff = found ? decodeDiff(found) : undefined;
      return found && diff !== undefined ? { configMap: found.metadata!.name!, diff } : undefined;
    },
    async readDiffConfigMap(namespace, name) {
      try {
        const { metadata, data, binaryData } = await core.readNamespacedConfigMap({ namespace, name });
        return { metadata, ...(data ? { data } : {}), ...(binaryData ? { binaryData } : {}) };
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    async writeDiff(run, diff, written) {
      if (written !== undefined) {
        // A later snapshot: one guarded patch, where create (409), read and replace took three
        // requests and carried the diff three times. Gone (404) or no longer the run's (422,
        // a test failed): the way below finds out what holds the name.
        const path = `/api/v1/namespaces/${encodeURIComponent(run.metadata.namespace)}/configmaps/${encodeURIComponent(written)}`;
        const patched = await json.sendIgnoringAnswer('PATCH', path, diffPatch(run, diff), JSON_PATCH).then(
          () => true,
          (error: unknown) => ([404, 422].includes(statusCodeOf(error) ?? 0) ? false : Promise.reject(error)),
        );
        if (patched) return written;
      }
      const body = buildDiffConfigMap(run, diff);
      const { namespace, name } = body.metadata as { namespace: string; name: string };
      const created = await core.createNamespacedConfigMap({ namespace, body }).then(
        () => true,
        (error: unknown) => (isAlreadyExists(error) ? false : Promise.reject(error)),
      );
      if (created) return name;
      // Replaced only when it is the run's own (a retried finalize), and only the version
      // read: a ConfigMap someone else put under the run's name is never overwritten.
      const existing = await core
        .readNamespacedConfigMap({ namespace, name })
        .catch((error: unknown) => (isNotFound(error) ? undefined : Promise.reject(error)));
      if (!existing) return core.createNamespacedConfigMap({ namespace, body }).then(() => name); // gone in between
      if (isOwnedByRun(existing, run)) return replaceGuarded(core, existing, body);
      // Squatted: the diff goes under a name the API server makes up, which no one can
      // take in advance; the one an earlier attempt of this finalize made is reused.
      const earlier = (await core.listNamespacedConfigMap({ namespace, labelSelector: `${RUN_UID_LABEL}=${run.metadata.uid}` })).items.find(
        (configMap) => configMap.metadata?.name?.startsWith(`${name}-`) && isOwnedByRun(configMap, run),
      );
      if (earlier) return replaceGuarded(core, earlier, body);
      const { name: _derived, ...metadata } = body.metadata!;
      const made = await core.createNamespacedConfigMap({
        namespace,
        body: { ...body, metadata: { ...metadata, generateName: `${name}-` } },
      });
      return made.metadata!.name!;
    },
  };
}
