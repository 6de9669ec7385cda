// The cluster objects a worker reads or writes for a run: the API key and git token
// (read for each use, never stored), the scripted model's ConfigMap, and the ConfigMap
// that keeps the full diff (its format: reconcile/diff-config-map.ts; which write replaces
// what: reconcile/diff-write.ts). Only ever in the run's own namespace.
import { CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { RUN_UID_LABEL, type ParsedCodingRun } from '../api/index.ts';
import { isAlreadyExists, isConflict, isNotFound, statusCodeOf } from '../kube/api-errors.ts';
import { JSON_PATCH, jsonRequests } from '../kube/json-requests.ts';
import { buildDiffConfigMap, decodeDiff, diffKindOf, type DiffConfigMap, type DiffKind } from '../reconcile/diff-config-map.ts';
import { decideDiffWrite, diffPatch, type DiffWrite } from '../reconcile/diff-write.ts';
import { diffConfigMapName } from '../reconcile/names.ts';
import { isOwnedByRun } from '../reconcile/ownership.ts';
import { isSecretUsableByRuns, secretNotUsableMessage } from '../reconcile/secret-opt-in.ts';
import { REASONS } from '../api/reasons.ts';
import { RunFailure } from '../api/run-failure.ts';

export interface RunResources {
  /** The value, undefined when the Secret or key is missing; throws a RunFailure (SecretNotAllowed) when the Secret is not labelled usable-by-runs. */
  secretValue(namespace: string, name: string, key: string): Promise<string | undefined>;
  configMapValue(namespace: string, name: string, key: string): Promise<string | undefined>;
  /**
   * Stores the run's diff in its diff ConfigMap, marked with the writer's `kind`, under the
   * derived name, or one the API server made up when someone else's object holds that. Only
   * the run's own is replaced; a final write replaces whatever it holds, a snapshot over one
   * marked final is `refused` (reconcile/diff-write.ts).
   * `written`: where this run's diff went last time (a step's snapshot), tried first.
   */
  writeDiff(run: ParsedCodingRun, diff: string, write: { kind: DiffKind; written?: string }): Promise<DiffWrite>;
  /** The diff last written for the run (a snapshot after a step, or the final one), where, and by which kind of writer, when there is one of its own. */
  readDiff(run: ParsedCodingRun): Promise<{ configMap: string; diff: string; kind: DiffKind } | undefined>;
  /** A diff ConfigMap as stored (spec.continueFrom reads the source run's), undefined when missing. */
  readDiffConfigMap(namespace: string, name: string): Promise<DiffConfigMap | undefined>;
}

/** Replaces `current` with `next`'s content, only if it is still the version read (else 409). */
async function replaceGuarded(core: CoreV1Api, current: V1ConfigMap, next: V1ConfigMap): Promise<string> {
  const { name, namespace, resourceVersion } = current.metadata as { name: string; namespace: string; resourceVersion: string };
  await core.replaceNamespacedConfigMap({ namespace, name, body: { ...next, metadata: { ...next.metadata, name, resourceVersion } } });
  return name;
}

/** Writes `next` over `current` (the run's own, as read) as decideDiffWrite says for a write of `kind`. */
async function writeOver(core: CoreV1Api, current: V1ConfigMap, next: V1ConfigMap, kind: DiffKind): Promise<DiffWrite> {
  const configMap = current.metadata!.name!;
  if (decideDiffWrite(current, kind).action === 'refuse') return { outcome: 'refused', configMap };
  return { outcome: 'written', configMap: await replaceGuarded(core, current, next) };
}

/**
 * How often the read-and-replace way is tried when the ConfigMap changed between its read and
 * its replace (409): the other writer may have been a snapshot or an ender, so the next try
 * reads what it left and decides again.
 */
const WRITE_ATTEMPTS = 3;

/**
 * The way that reads what holds the derived name: create, else write over the run's own (as
 * decideDiffWrite says), else, when someone else's object holds it, under a generated name.
 */
async function createOrWriteOver(core: CoreV1Api, run: ParsedCodingRun, body: V1ConfigMap, kind: DiffKind): Promise<DiffWrite> {
  const { namespace, name } = body.metadata as { namespace: string; name: string };
  const created = await core.createNamespacedConfigMap({ namespace, body }).then(
    () => true,
    (error: unknown) => (isAlreadyExists(error) ? false : Promise.reject(error)),
  );
  if (created) return { outcome: 'written', configMap: name };
  // Written over only when it is the run's own (a retried finalize, a later snapshot), and
  // only the version read: a ConfigMap someone else put under the run's name never is.
  const existing = await core
    .readNamespacedConfigMap({ namespace, name })
    .catch((error: unknown) => (isNotFound(error) ? undefined : Promise.reject(error)));
  if (!existing) {
    await core.createNamespacedConfigMap({ namespace, body }); // gone in between
    return { outcome: 'written', configMap: name };
  }
  if (isOwnedByRun(existing, run)) return writeOver(core, existing, body, kind);
  // Squatted: the diff goes under a name the API server makes up, which no one can
  // take in advance; the one an earlier write for the run made is reused.
  const earlier = (await core.listNamespacedConfigMap({ namespace, labelSelector: `${RUN_UID_LABEL}=${run.metadata.uid}` })).items.find(
    (configMap) => configMap.metadata?.name?.startsWith(`${name}-`) && isOwnedByRun(configMap, run),
  );
  if (earlier) return writeOver(core, earlier, body, kind);
  const { name: _derived, ...metadata } = body.metadata!;
  const made = await core.createNamespacedConfigMap({
    namespace,
    body: { ...body, metadata: { ...metadata, generateName: `${name}-` } },
  });
  return { outcome: 'written', configMap: made.metadata!.name! };
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
      return found && diff !== undefined ? { configMap: found.metadata!.name!, diff, kind: diffKindOf(found) } : undefined;
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
    async writeDiff(run, diff, { kind, written }) {
      if (written !== undefined) {
        // A later write: one guarded patch, where create (409), read and replace took three
        // requests and carried the diff three times. Gone (404), no longer the run's, a
        // snapshot over a final diff (422, a test failed) or a final write to a ConfigMap
        // without annotations (422, the mark's add failed): the way below finds out what
        // holds the name.
        const path = `/api/v1/namespaces/${encodeURIComponent(run.metadata.namespace)}/configmaps/${encodeURIComponent(written)}`;
        const patched = await json.sendIgnoringAnswer('PATCH', path, diffPatch(run, diff, kind), JSON_PATCH).then(
          () => true,
          (error: unknown) => ([404, 422].includes(statusCodeOf(error) ?? 0) ? false : Promise.reject(error)),
        );
        if (patched) return { outcome: 'written', configMap: written };
      }
      const body = buildDiffConfigMap(run, diff, kind);
      for (let attempt = 1; ; attempt++) {
        try {
          return await createOrWriteOver(core, run, body, kind);
        } catch (error) {
          if (!isConflict(error) || attempt >= WRITE_ATTEMPTS) throw error;
        }
      }
    },
  };
}
