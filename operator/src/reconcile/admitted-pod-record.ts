// status.admittedPod: the sandbox pod's images as the API server admitted it, which the
// workers' check before every exec compares each container's image with (admitted-pod.ts).
// Admission webhooks rewrite images (a verifying webhook pins the digest it checked), and only
// the API server's answer to the pod's create shows what they wrote. Judged later from the pod
// alone, a digest could be told from one patched in (`kubectl set image`) only by the spec's
// metadata.generation, which honest changes bump too: Kueue removing its scheduling gate, an
// in-place resize. So the reconciler records the answer, in the status write that gives the run
// its pod. Never a read of the pod (the informer's cache): whoever may create pods can plant one
// at the run's pod name with its labels and controller ownerReference and any image, and a
// read cannot tell it from the run's own. A run whose answer was lost has no record, and its pod
// is judged by its generation alone (admitted-pod.ts). The record also keeps the digest each init
// container was first reported to have run under the operator's repository (withRanImages): the
// kubelet's report, read from the cache, but only of the pod of the record's uid. Pure.
import type { V1Pod } from '@kubernetes/client-node';
import { ADMITTED_IMAGE_MAX_LENGTH, ADMITTED_IMAGES_MAX, isTerminal, type AdmittedPodStatus, type CodingRunStatus } from '../api/index.ts';
import { ranImageKey, ranUnderRepository } from './init-container-runs.ts';

/** The longest container name the API server takes (a DNS label). */
const CONTAINER_NAME_MAX_LENGTH = 63;

/**
 * A pod of the run as the API server answered this process: its create (the pod as admitted)
 * or its warm pool claim (the pod now).
 */
export interface PodSeen {
  pod: V1Pod;
  from: 'create' | 'claim';
  /** The name the run's own pod is made under (sandboxPodName): any other is a claimed warm pool pod. */
  freshName: string;
}

/**
 * Whether the pod's spec generation shows no change since its creation but the operator's own:
 * 1 at creation whatever admission wrote (users cannot set it), 2 once a warm pool pod is
 * claimed. A pod is told claimed by its name (not `freshName`, the run's own pod's), which
 * nobody can change, not by the claim's label, which anyone who may patch pods can add.
 * Undefined where the API server keeps no generation for pods (before 1.33): nothing is told.
 */
export function unchangedSinceCreation(pod: V1Pod, freshName: string | undefined): boolean | undefined {
  const generation = pod.metadata?.generation;
  if (generation === undefined) return undefined;
  const claims = pod.metadata?.name === freshName ? 0 : 1;
  return generation === 1 + claims;
}

/** The record of the pod's images; undefined when they may have changed since admission, or do not fit the status' bounds. */
export function admittedPodRecord(seen: PodSeen): AdmittedPodStatus | undefined {
  const { pod, from } = seen;
  const uid = pod.metadata?.uid;
  if (!uid) return undefined;
  // The create's answer is the pod as admitted; a claim's shows the pod now.
  if (from !== 'create' && unchangedSinceCreation(pod, seen.freshName) !== true) return undefined;
  const containers = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])];
  if (containers.length === 0 || containers.length > ADMITTED_IMAGES_MAX) return undefined;
  const images = containers.map((container) => ({ container: container.name, image: container.image ?? '' }));
  // A record the API server would refuse (the status schema's bounds) would stop every status write of the run.
  const fits = images.every(
    ({ container, image }) =>
      container.length > 0 &&
      container.length <= CONTAINER_NAME_MAX_LENGTH &&
      image.length > 0 &&
      image.length <= ADMITTED_IMAGE_MAX_LENGTH,
  );
  return fits ? { uid, images } : undefined;
}

/** The status without a record: of a pod the run no longer has. */
function withoutRecord(status: CodingRunStatus): CodingRunStatus {
  if (status.admittedPod === undefined) return status;
  const { admittedPod: _dropped, ...rest } = status;
  return rest;
}

/**
 * The status to write, with the pod it names (podName) recorded as admitted: once, from the
 * answer to its create or claim. A record of another pod (the run's pod was
 * refused and made again) is replaced or dropped, and so is one of a run that no longer names
 * a pod. A finished run is left as it is: nothing runs in its pod any more.
 */
export function withAdmittedPod(status: CodingRunStatus, seen: PodSeen | undefined): CodingRunStatus {
  if (isTerminal(status.phase)) return status;
  if (status.podName === undefined) return withoutRecord(status);
  if (!seen || seen.pod.metadata?.name !== status.podName) return status;
  if (status.admittedPod !== undefined && status.admittedPod.uid === seen.pod.metadata?.uid) return status;
  const record = admittedPodRecord(seen);
  return record ? { ...status, admittedPod: record } : withoutRecord(status);
}

/**
 * The status with the record of its pod (status.admittedPod) holding, for each of the pod's init
 * containers, the image the kubelet first reports it ran under the operator's repository
 * (`operatorImage`'s; init-container-runs.ts ranUnderRepository), under ranImageKey. containerd
 * names an image by the first of its references on the node in lexical order: once another tenant
 * pulls a copy (docker.io/a/copy), the same run is reported under that name, and without a pinned
 * sandboxImage no digest was known to pass it by, so the run failed SandboxInvalid mid-run. Written
 * once, never replaced; for the pod of the record's uid only (`pod`, the cache's, may be one planted
 * at the name: its uid is not the one the create's answer gave), so a pod made again starts without
 * (withAdmittedPod makes its record afresh). What is recorded is the kubelet's report (pod status,
 * which a run's author may not write), never a spec's image. Left out where the status' bounds
 * would refuse it (they stop every status write of the run). Pure.
 */
export function withRanImages(status: CodingRunStatus, pod: V1Pod | undefined, operatorImage: string): CodingRunStatus {
  const record = status.admittedPod;
  if (isTerminal(status.phase) || !record || !pod || pod.metadata?.uid !== record.uid || pod.metadata?.name !== status.podName)
    return status;
  const recorded = new Set(record.images.map(({ container }) => container));
  const added: AdmittedPodStatus['images'] = [];
  for (const ran of pod.status?.initContainerStatuses ?? []) {
    const key = ranImageKey(ran.name);
    // An init container the API server admitted in this pod, not yet recorded as run.
    if (!recorded.has(ran.name) || recorded.has(key) || key.length > CONTAINER_NAME_MAX_LENGTH) continue;
    const image = ranUnderRepository(ran, operatorImage);
    if (image !== undefined && image.length <= ADMITTED_IMAGE_MAX_LENGTH) added.push({ container: key, image });
  }
  if (added.length === 0 || record.images.length + added.length > ADMITTED_IMAGES_MAX) return status;
  return { ...status, admittedPod: { ...record, images: [...record.images, ...added] } };
}
