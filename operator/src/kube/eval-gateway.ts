// The eval controller's door to the API server: create an attempt's run, read what grading
// needs of a finished run (its transcript chunks, its diff ConfigMap), write the eval's status
// and Events. A thin adapter over client-node; the RBAC it needs is in the chart's rbac.yaml.
// An Event's message may quote the API server's or a webhook's words, or a grader's, and
// kubectl prints it as it is, so it is written on one line, hidden characters spelled out
// (text/one-line-text.ts), whoever composed it, as kube/event-recorder.ts writes a run's.
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { EVAL_PLURAL, type CodingEval, type CodingEvalStatus } from '../api/coding-eval.ts';
import { GROUP, PLURAL, VERSION } from '../api/group.ts';
import type { CodingRun } from '../api/index.ts';
import type { DiffConfigMap } from '../reconcile/diff-config-map.ts';
import { transcriptSelector, type TranscriptChunk } from '../record/transcript-chunks.ts';
import { oneLineText } from '../text/one-line-text.ts';
import { apiRefusal, isAlreadyExists, isNotFound } from './api-errors.ts';
import { eventName } from './event-name.ts';

export interface EvalGateway {
  /**
   * Creates the run: 'created', 'exists' (the cache had not seen it yet), the API server's
   * refusal of it as invalid (400/422, or a 403 an admission policy or webhook gave, such as
   * allowRepo's), which no retry can change, or any other 403 (a ResourceQuota on codingruns,
   * RBAC), which may pass later. Other failures (a 5xx, the network) throw, to be retried; a
   * run too large to store throws too (isTooLargeToStore), and the eval reconciler fails its
   * attempt RunRefused rather than retry it.
   */
  createRun(run: {
    metadata: { namespace: string; name: string };
  }): Promise<'created' | 'exists' | { refused: string } | { forbidden: string }>;
  /** The run under that name, undefined when there is none: whose a name createRun found taken is. */
  getRun(namespace: string, name: string): Promise<CodingRun | undefined>;
  /**
   * Lists the run's transcript chunks a page at a time into `take`, until it says 'enough' or
   * none are left: a namespace's users can label any number of 1 MiB ConfigMaps as a run's
   * chunks, and one list of them all was one allocation of that size in the operator.
   */
  listTranscript(namespace: string, runUid: string, take: (page: TranscriptChunk[]) => 'more' | 'enough'): Promise<void>;
  getDiffConfigMap(namespace: string, name: string): Promise<DiffConfigMap | undefined>;
  /** Replaces the status; 409 when the eval's resourceVersion is stale. */
  replaceEvalStatus(evaluation: CodingEval, status: CodingEvalStatus): Promise<CodingEval>;
  recordEvent(
    evaluation: CodingEval,
    event: { type: 'Normal' | 'Warning'; reason: string; message: string },
    identity: string,
  ): Promise<void>;
}

const owned = (configMap: V1ConfigMap) => {
  const { name, labels, ownerReferences } = configMap.metadata ?? {};
  return { metadata: { ...(name ? { name } : {}), ...(labels ? { labels } : {}), ...(ownerReferences ? { ownerReferences } : {}) } };
};

/** The most of a message an Event carries (events.k8s.io's note is at most 1 kB). */
const EVENT_MESSAGE_CHARACTERS = 1024;

/** Chunks per page: a chunk is at most 1 MiB, so a page is at most a few MiB in the operator's heap. */
const TRANSCRIPT_PAGE_CHUNKS = 4;

/**
 * A 403 from an admission policy or webhook ("ValidatingAdmissionPolicy 'x' with binding 'y'
 * denied request", "admission webhook "x" denied the request"), such as the chart's allowRepo
 * policy: it judged the run itself, as a 422 does, and would judge it the same way again. Other
 * 403s (a ResourceQuota, RBAC) may pass later.
 */
const ADMISSION_DENIAL = /\bdenied (the )?request\b/;

export function createEvalGateway(kubeConfig: KubeConfig): EvalGateway {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  return {
    async createRun(run) {
      try {
        await custom.createNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          namespace: run.metadata.namespace,
          body: run,
        });
        return 'created';
      } catch (error) {
        if (isAlreadyExists(error)) return 'exists';
        const refusal = apiRefusal(error);
        if (!refusal) throw error;
        return refusal.code === 403 && !ADMISSION_DENIAL.test(refusal.message)
          ? { forbidden: refusal.message }
          : { refused: refusal.message };
      }
    },
    async getRun(namespace, name) {
      try {
        return (await custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name })) as CodingRun;
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    async listTranscript(namespace, runUid, take) {
      let next: string | undefined;
      do {
        const page = await core.listNamespacedConfigMap({
          namespace,
          labelSelector: transcriptSelector(runUid),
          limit: TRANSCRIPT_PAGE_CHUNKS,
          ...(next ? { _continue: next } : {}),
        });
        const chunks = page.items.map((configMap) => ({
          ...owned(configMap),
          ...(configMap.binaryData ? { binaryData: configMap.binaryData } : {}),
        }));
        if (take(chunks) === 'enough') return;
        next = page.metadata?._continue;
      } while (next);
    },
    async getDiffConfigMap(namespace, name) {
      try {
        const configMap = await core.readNamespacedConfigMap({ namespace, name });
        return {
          ...owned(configMap),
          ...(configMap.data ? { data: configMap.data } : {}),
          ...(configMap.binaryData ? { binaryData: configMap.binaryData } : {}),
        };
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    async replaceEvalStatus(evaluation, status) {
      const body = {
        apiVersion: evaluation.apiVersion,
        kind: evaluation.kind,
        metadata: evaluation.metadata,
        spec: evaluation.spec,
        status,
      };
      return (await custom.replaceNamespacedCustomObjectStatus({
        group: GROUP,
        version: VERSION,
        plural: EVAL_PLURAL,
        namespace: evaluation.metadata.namespace,
        name: evaluation.metadata.name,
        body,
      })) as CodingEval;
    },
    async recordEvent(evaluation, event, identity) {
      const time = new Date();
      await core.createNamespacedEvent({
        namespace: evaluation.metadata.namespace,
        body: {
          metadata: {
            name: eventName(evaluation.metadata.name, time),
            namespace: evaluation.metadata.namespace,
          },
          involvedObject: {
            apiVersion: evaluation.apiVersion,
            kind: evaluation.kind,
            name: evaluation.metadata.name,
            namespace: evaluation.metadata.namespace,
            uid: evaluation.metadata.uid,
          },
          type: event.type,
          reason: event.reason,
          message: oneLineText(event.message, EVENT_MESSAGE_CHARACTERS),
          source: { component: 'chamvi-operator' },
          reportingComponent: 'chamvi.dev/operator',
          reportingInstance: identity.slice(0, 128),
          firstTimestamp: time,
          lastTimestamp: time,
          count: 1,
        },
      });
    },
  };
}
