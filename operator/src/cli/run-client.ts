// The plugin's only door to the API server: read runs and diff ConfigMaps, watch runs, write
// the approval annotation. A thin adapter over client-node; every decision is elsewhere.
// API failures become CliErrors whose message a user can act on.
import {
  ApiException,
  AuthenticationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  type V1ConfigMap,
  Watch,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { API_VERSION, GROUP, PLURAL, VERSION, type CodingRun } from '../api/index.ts';
import { EVAL_PLURAL, type CodingEval } from '../api/coding-eval.ts';
import { CANCEL_ANNOTATION } from '../reconcile/cancel-request.ts';
import { isClientTimeout, statusCodeOf } from '../kube/api-errors.ts';
import type { DiffConfigMap } from '../reconcile/diff-config-map.ts';
import { transcriptSelector, type TranscriptChunk } from '../record/transcript-chunks.ts';
import { CliError } from './errors/cli-error.ts';

export interface RunList {
  items: CodingRun[];
  resourceVersion?: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface RunWatch {
  /**
   * Resolves when the watch ends: the server ends one every few minutes, client-node one that
   * brought nothing for 30 s, and one fails when the API server goes away.
   */
  ended: Promise<void>;
  stop(): void;
  /**
   * Where the next watch takes up from: the last resourceVersion this one saw (an object's or
   * a bookmark's; the one it started from if none came). Undefined when the caller must list
   * afresh instead: the server said that version is too old (410), or the watch failed.
   */
  readonly resumeFrom: string | undefined;
}

export interface RunClient {
  /** Namespace used when the command gives none: the kubeconfig context's, else "default". */
  readonly defaultNamespace: string;
  getRun(namespace: string, name: string): Promise<CodingRun | undefined>;
  getEval(namespace: string, name: string): Promise<CodingEval | undefined>;
  /** Runs in one namespace, or in all when namespace is undefined. */
  listRuns(namespace: string | undefined): Promise<RunList>;
  watchRuns(
    namespace: string | undefined,
    name: string | undefined,
    resourceVersion: string | undefined,
    onEvent: (type: WatchEventType, run: CodingRun) => void,
  ): Promise<RunWatch>;
  /** The caller's user name as the API server authenticates it (SelfSubjectReview, as `kubectl auth whoami`). */
  whoAmI(): Promise<string>;
  /**
   * Writes an answer's annotations (chamvi.dev/approval and chamvi.dev/approver) in one merge
   * patch, to the run with that uid only: the API server refuses it (422) when the name now
   * holds another run, whose pending approval may carry the same id.
   */
  setApprovalAnnotations(namespace: string, name: string, uid: string, annotations: Record<string, string>): Promise<void>;
  /**
   * Writes the chamvi.dev/cancel annotation (reconcile/cancel-request.ts) to the run with that
   * uid only: the run read may have been deleted and its name taken by another since.
   */
  setCancelAnnotation(namespace: string, name: string, uid: string, value: string): Promise<void>;
  getConfigMap(namespace: string, name: string): Promise<DiffConfigMap | undefined>;
  /**
   * The chunks of a run's transcript (record/transcript-chunks.ts), a page at a time to `take`
   * until it says 'enough' or none is left; returns the list's resourceVersion to watch from.
   */
  listTranscript(
    namespace: string,
    uid: string,
    take: (page: TranscriptChunk[]) => 'more' | 'enough',
  ): Promise<{ resourceVersion?: string }>;
  /** Each chunk as it is created or grows. */
  watchTranscript(
    namespace: string,
    uid: string,
    resourceVersion: string | undefined,
    onChunk: (chunk: TranscriptChunk) => void,
  ): Promise<RunWatch>;
}

/**
 * ConfigMaps per page of a transcript list. A writer's chunk is at most 16 steps of 16 KiB, but
 * anyone who may create ConfigMaps in the namespace can label thousands of 1 MiB ones as a run's:
 * read in one list, the plugin held them all at once, however little of them the reader keeps.
 */
export const TRANSCRIPT_PAGE_CHUNKS = 8;

/** What the transcript reader needs of a ConfigMap: its name, labels, owners and entries. */
function chunkOf(configMap: V1ConfigMap): TranscriptChunk {
  const { name, labels, ownerReferences } = configMap.metadata ?? {};
  return {
    metadata: { ...(name ? { name } : {}), ...(labels ? { labels } : {}), ...(ownerReferences ? { ownerReferences } : {}) },
    ...(configMap.binaryData ? { binaryData: configMap.binaryData } : {}),
  };
}

/** The API server's own message from an error body (JSON Status), if there is one. */
function serverMessage(error: unknown): string | undefined {
  if (!(error instanceof ApiException)) return undefined;
  const body: unknown = error.body;
  try {
    const status = (typeof body === 'string' ? JSON.parse(body) : body) as { message?: unknown };
    return typeof status?.message === 'string' ? status.message : undefined;
  } catch {
    return typeof body === 'string' && body ? body : undefined;
  }
}

function toCliError(error: unknown, doing: string, server: string): CliError {
  const code = statusCodeOf(error);
  const message = serverMessage(error);
  if (code === 401) return new CliError(`${doing}: unauthorized: the kubeconfig's credentials were refused by ${server}`);
  if (code === 403) return new CliError(`${doing}: forbidden: ${message ?? 'your user lacks the RBAC permission'}`);
  if (code === 404)
    return new CliError(`${doing}: ${message ?? 'not found'} (is the CodingRun CRD installed? kubectl get crd codingruns.chamvi.dev)`);
  if (code !== undefined) return new CliError(`${doing}: the API server answered ${code}: ${message ?? String(error)}`);
  const cause = error instanceof Error ? error.message : String(error);
  return new CliError(`${doing}: cannot reach the API server at ${server}: ${cause}`);
}

/**
 * Opens one watch and keeps where it got to, so the caller resumes there and lists again only
 * when it must. Relisting after every end cost `get -w` a list of the whole namespace each
 * half minute of quiet (client-node's inactivity timer) for every user watching.
 */
async function openWatch<T extends { metadata?: { resourceVersion?: string } }>(
  watch: Watch,
  path: string,
  query: Record<string, string | boolean>,
  onObject: (type: WatchEventType, object: T) => void,
): Promise<RunWatch> {
  let resumeFrom = typeof query.resourceVersion === 'string' ? query.resourceVersion : undefined;
  let stopped = false;
  let finish: () => void = () => {};
  const ended = new Promise<void>((resolve) => (finish = resolve));
  const controller = await watch.watch(
    path,
    query,
    (type: string, object: T) => {
      // An ERROR event is a Status: 410 when the version is too old. The server ends the watch after it.
      if (type === 'ERROR') return void (resumeFrom = undefined);
      if (object.metadata?.resourceVersion) resumeFrom = object.metadata.resourceVersion;
      if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') onObject(type, object);
    },
    (error: unknown) => {
      // Our own stop, a clean close and client-node's inactivity timer end nothing the next
      // watch cannot take up; any other failure lists afresh (and the list says what is wrong).
      if (error && !stopped && !isClientTimeout(error)) resumeFrom = undefined;
      finish();
    },
  );
  return {
    ended,
    stop: () => {
      stopped = true;
      controller.abort();
    },
    get resumeFrom() {
      return resumeFrom;
    },
  };
}

export interface RunClientOptions {
  /** The watcher to use; tests pass one whose inactivity timer is short. */
  watch?: Watch;
}

export function createRunClient(kubeConfig: KubeConfig, options: RunClientOptions = {}): RunClient {
  const watch = options.watch ?? new Watch(kubeConfig);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const server = kubeConfig.getCurrentCluster()?.server ?? '(no server in the kubeconfig)';
  const context = kubeConfig.getContextObject(kubeConfig.getCurrentContext());
  // client-node sends JSON Patch unless told otherwise; the annotation is a merge patch.
  const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  const runPath = (namespace: string, name: string) => ({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name });
  const fail =
    (doing: string) =>
    (error: unknown): never => {
      throw toCliError(error, doing, server);
    };

  return {
    defaultNamespace: context?.namespace || 'default',

    async getRun(namespace, name) {
      try {
        return (await custom.getNamespacedCustomObject(runPath(namespace, name))) as CodingRun;
      } catch (error) {
        // A 404 for the object says `... "name" not found`; one for a missing CRD does not.
        if (statusCodeOf(error) === 404 && /not found/.test(serverMessage(error) ?? '')) return undefined;
        return fail(`get codingrun ${name}`)(error);
      }
    },

    async getEval(namespace, name) {
      try {
        return (await custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          plural: EVAL_PLURAL,
          namespace,
          name,
        })) as CodingEval;
      } catch (error) {
        if (statusCodeOf(error) === 404 && /not found/.test(serverMessage(error) ?? '')) return undefined;
        return fail(`get codingeval ${name}`)(error);
      }
    },

    async listRuns(namespace) {
      const list = (await (
        namespace
          ? custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace })
          : custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })
      ).catch(fail('list codingruns'))) as { items?: CodingRun[]; metadata?: { resourceVersion?: string } };
      return { items: list.items ?? [], ...(list.metadata?.resourceVersion ? { resourceVersion: list.metadata.resourceVersion } : {}) };
    },

    async watchRuns(namespace, name, resourceVersion, onEvent) {
      const path = `/apis/${API_VERSION}${namespace ? `/namespaces/${namespace}` : ''}/${PLURAL}`;
      const query: Record<string, string | boolean> = { allowWatchBookmarks: true };
      if (resourceVersion) query.resourceVersion = resourceVersion;
      if (name) query.fieldSelector = `metadata.name=${name}`;
      return openWatch<CodingRun>(watch, path, query, onEvent).catch(fail('watch codingruns'));
    },

    async whoAmI() {
      const review = await kubeConfig
        .makeApiClient(AuthenticationV1Api)
        .createSelfSubjectReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } })
        .catch(fail('find out who you are (SelfSubjectReview)'));
      const user = review.status?.userInfo?.username;
      if (!user) throw new CliError(`the API server at ${server} did not say who you are (SelfSubjectReview has no user name)`);
      return user;
    },

    async setApprovalAnnotations(namespace, name, uid, annotations) {
      // A patch naming another metadata.uid than the object's is refused (uid is immutable).
      const body = { metadata: { uid, annotations } };
      await custom.patchNamespacedCustomObject({ ...runPath(namespace, name), body }, mergePatch).catch(fail(`annotate codingrun ${name}`));
    },

    async setCancelAnnotation(namespace, name, uid, value) {
      // As the approval's: the API server refuses (422) a uid that is not the object's.
      const body = { metadata: { uid, annotations: { [CANCEL_ANNOTATION]: value } } };
      await custom.patchNamespacedCustomObject({ ...runPath(namespace, name), body }, mergePatch).catch(fail(`annotate codingrun ${name}`));
    },

    async getConfigMap(namespace, name) {
      try {
        const configMap = await core.readNamespacedConfigMap({ namespace, name });
        // Labels and owners too: the diff is printed only from a ConfigMap the run owns.
        const { labels, ownerReferences } = configMap.metadata ?? {};
        return {
          metadata: { ...(labels ? { labels } : {}), ...(ownerReferences ? { ownerReferences } : {}) },
          ...(configMap.data ? { data: configMap.data } : {}),
          ...(configMap.binaryData ? { binaryData: configMap.binaryData } : {}),
        };
      } catch (error) {
        if (statusCodeOf(error) === 404) return undefined;
        return fail(`get configmap ${name}`)(error);
      }
    },

    async listTranscript(namespace, uid, take) {
      // Every page of one list is served from the snapshot of its first: that page's version is the list's.
      let resourceVersion: string | undefined;
      let next: string | undefined;
      do {
        const page = await core
          .listNamespacedConfigMap({
            namespace,
            labelSelector: transcriptSelector(uid),
            limit: TRANSCRIPT_PAGE_CHUNKS,
            ...(next ? { _continue: next } : {}),
          })
          .catch(fail('list the transcript ConfigMaps'));
        resourceVersion ??= page.metadata?.resourceVersion;
        if (take(page.items.map(chunkOf)) === 'enough') break;
        next = page.metadata?._continue;
      } while (next);
      return resourceVersion ? { resourceVersion } : {};
    },

    async watchTranscript(namespace, uid, resourceVersion, onChunk) {
      const query: Record<string, string | boolean> = { labelSelector: transcriptSelector(uid), allowWatchBookmarks: true };
      if (resourceVersion) query.resourceVersion = resourceVersion;
      return openWatch<V1ConfigMap>(watch, `/api/v1/namespaces/${namespace}/configmaps`, query, (type, configMap) => {
        if (type === 'ADDED' || type === 'MODIFIED') onChunk(chunkOf(configMap));
      }).catch(fail('watch the transcript ConfigMaps'));
    },
  };
}
