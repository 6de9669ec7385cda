// The transcript port (what a worker records of a run) and its adapter for the cluster: one
// request to the API server per chunk the entries go into (one entry, as a rule; several when
// a step's record caught up with earlier ones still on their way, trailing-record.ts). A
// chunk's first step creates it; other entries are a JSON Patch that adds their binaryData
// keys, guarded by tests that the chunk is the run's as every reader judges it (the operator's
// labels and the run as its controller, ownership.ts), so no read comes first and a ConfigMap
// someone else put under the chunk's name is never written: entries added to one the readers
// then ignore would be lost from `logs` and evals.
// The format and the bounds are record/transcript-chunks.ts's; why ConfigMaps: docs/transcript.md.
// A write per step: sent with the lighter client (kube/json-requests.ts), its answer unread.
import type { KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, KIND, RUN_UID_LABEL } from '../api/index.ts';
import { statusCodeOf } from '../kube/api-errors.ts';
import { JSON_PATCH, jsonRequests } from '../kube/json-requests.ts';
import { labelPointer } from '../reconcile/json-pointer.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../reconcile/ownership.ts';
import { buildTranscriptChunk, chunkIndexOf, encodeEntry, opensChunk } from '../record/transcript-chunks.ts';
import type { TranscriptEntry } from '../record/transcript-entry.ts';
import type { RunIdentity } from '../reconcile/names.ts';

export type TranscriptRun = RunIdentity & { metadata: { namespace: string } };

export interface TranscriptWriter {
  /**
   * Records the entries (again, harmlessly, when a redone job records them twice), one write
   * per chunk, side by side. Throws when the API server cannot be reached.
   */
  append(run: TranscriptRun, entries: readonly TranscriptEntry[]): Promise<void>;
}

/**
 * JSON Patch tests that the object is the run's as isOwnedByRun judges it: the operator's
 * labels, and the run (by uid, apiVersion and kind) as its controller. The operator writes that
 * owner first and alone (buildTranscriptChunk); a chunk with it elsewhere fails the tests and
 * is kept apart, which costs nothing but a ConfigMap.
 */
function ownedByRunTests(uid: string): object[] {
  return [
    { op: 'test', path: labelPointer(MANAGED_BY_LABEL), value: MANAGED_BY },
    { op: 'test', path: labelPointer(RUN_UID_LABEL), value: uid },
    { op: 'test', path: '/metadata/ownerReferences/0/uid', value: uid },
    { op: 'test', path: '/metadata/ownerReferences/0/controller', value: true },
    { op: 'test', path: '/metadata/ownerReferences/0/apiVersion', value: API_VERSION },
    { op: 'test', path: '/metadata/ownerReferences/0/kind', value: KIND },
  ];
}

/** The entries by the chunk they go into. */
function entriesByChunk(entries: readonly TranscriptEntry[]): TranscriptEntry[][] {
  const chunks = new Map<number, TranscriptEntry[]>();
  for (const entry of entries) {
    const index = chunkIndexOf(entry.step);
    const chunk = chunks.get(index);
    if (chunk) chunk.push(entry);
    else chunks.set(index, [entry]);
  }
  return [...chunks.values()];
}

export function kubernetesTranscriptWriter(kubeConfig: KubeConfig): TranscriptWriter {
  const json = jsonRequests(kubeConfig);
  const configMaps = (namespace: string) => `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`;
  /** Entries of one chunk in one request. */
  async function appendToChunk(run: TranscriptRun, entries: readonly TranscriptEntry[]): Promise<void> {
    const encoded = entries.map((entry) => encodeEntry(entry));
    const namespace = run.metadata.namespace;
    const body = buildTranscriptChunk(
      run,
      chunkIndexOf(entries[0]!.step),
      Object.fromEntries(encoded.map(({ key, value }) => [key, value])),
    );
    const name = body.metadata!.name!;
    const create = () => json.sendIgnoringAnswer('POST', configMaps(namespace), body);
    const patch = () =>
      json.sendIgnoringAnswer(
        'PATCH',
        `${configMaps(namespace)}/${encodeURIComponent(name)}`,
        [
          ...ownedByRunTests(run.metadata.uid),
          ...encoded.map(({ key, value }) => ({ op: 'add', path: `/binaryData/${key}`, value: value.toString('base64') })),
        ],
        JSON_PATCH,
      );
    // Kept apart: a chunk held by someone else's ConfigMap (a name is no identity,
    // ownership.ts), or one the API server will not grow; the plugin reads every chunk the run owns.
    const createApart = () =>
      json.sendIgnoringAnswer('POST', configMaps(namespace), {
        ...body,
        metadata: { ...body.metadata, name: undefined, generateName: `${name}-` },
      });
    const first = entries.some(opensChunk) ? 'create' : 'patch';
    try {
      await (first === 'create' ? create() : patch());
      return;
    } catch (error) {
      const code = statusCodeOf(error);
      // create: the chunk exists (a redone step) → add to it; patch: no chunk yet → create it.
      if (first === 'create' && code === 409) {
        await patch().catch(async (again: unknown) => {
          if (statusCodeOf(again) !== 422) throw again;
          await createApart();
        });
        return;
      }
      if (first === 'patch' && code === 404) {
        await create().catch((again: unknown) => (statusCodeOf(again) === 409 ? patch() : Promise.reject(again)));
        return;
      }
      // 422: a test failed (not the run's object) or the object would be too large.
      if (code === 422 || code === 413) {
        await createApart();
        return;
      }
      throw error;
    }
  }
  return {
    async append(run, entries) {
      await Promise.all(entriesByChunk(entries).map((chunk) => appendToChunk(run, chunk)));
    },
  };
}
