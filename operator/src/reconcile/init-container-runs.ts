// What a sandbox pod's init containers ran, by what the kubelet reports (status.initContainerStatuses),
// not by the spec. The one the operator builds (chamvi-tools, for a custom image: it copies node and
// the toolbox the sandbox runs into an emptyDir) runs once, and the kubelet does not run it again when
// its image changes after: an image patched in while the pod is Pending and patched back once it
// exited leaves the built spec, the run's record of its admitted images matched again, and a rigged
// toolbox behind, which every exec then runs. The spec cannot tell; the status can (the image the
// kubelet ran, not the spec's now). admitted-pod.ts podAdditions applies it to every sandbox pod the
// operator judges: a run's own pod before every exec, a claimed pool pod, a pool pod, the isolation
// probe. Pure.
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { PodAddition, SandboxPodShape } from './admitted-pod.ts';
import { normalizeImage } from './image-reference.ts';
import { shortField } from './short-field.ts';

/** dockershim's prefix on an imageID; containerd and CRI-O report the bare `repository@sha256:...`. */
const DOCKER_PULLABLE = 'docker-pullable://';

const reportedImage = (reported: string | undefined) =>
  reported ? normalizeImage(reported.startsWith(DOCKER_PULLABLE) ? reported.slice(DOCKER_PULLABLE.length) : reported) : undefined;

/**
 * Whether the image the kubelet reports a container ran (its status' `image`, or `imageID`) is
 * of `built`'s repository. The runtime reports a name of the image it ran, not the spec's words:
 * the reference spelled out (docker.io/library/...), the first of the image's tags on the node,
 * which may be another one (kubernetes#51017); and `imageID` is a digest, the one the pulled tag
 * resolved to then, which the status cannot tie to the tag. So a tag or digest of the built
 * repository passes (the operator's sandbox image, whose every build is the operator's own, as
 * admitted-pod.ts operatorImage takes it); an image of any other repository fails.
 */
function ranFrom(reported: string | undefined, built: string): boolean {
  const named = reportedImage(reported);
  return named !== undefined && named.repository === normalizeImage(built)?.repository;
}

/**
 * Whether the digest the kubelet reports (imageID) is one the operator knows the container's image
 * by: a built image pinned to it or the one the run's record says the API server admitted
 * (never the spec's image now, which can be patched back at the digest of whatever ran). Then the repository the runtime names does not matter:
 * containerd names the first of the image's references in lexical order, so another tenant's copy
 * of the same image on the node (docker.io/a/copy) names it for every pod there.
 */
function ranKnownDigest(status: V1ContainerStatus, known: readonly (string | undefined)[]): boolean {
  const digest = reportedImage(status.imageID)?.digest;
  return digest !== undefined && known.some((image) => image !== undefined && normalizeImage(image)?.digest === digest);
}

/** Whether the pod is past its init containers: every one of them must have run, and ended well. */
function pastInit(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return (
    phase === 'Running' ||
    phase === 'Succeeded' ||
    (pod.status?.containerStatuses ?? []).some((status) => status.state?.running || status.state?.terminated) ||
    (pod.status?.conditions ?? []).some((condition) => condition.type === 'Ready' && condition.status === 'True')
  );
}

/**
 * What the pod's init containers that the operator builds ran that its pod does not: each one, once
 * it ran, must have run an image of the repository the builders give it (or a digest the operator
 * knows it by: ranKnownDigest), once, and exited 0; a pod past its init containers with no such
 * record is not the operator's either. Before one ran there is nothing to judge (a pool pod still
 * Pending, a run pod pulling): the spec check sees an image patched in now, and exec waits for the
 * pod to be Ready, by when it has run. It holds wherever the kubelet reports statuses, generation
 * kept (1.33+) or not. An init container the builders do not make is named by podAdditions already.
 */
export function initContainerRuns(pod: V1Pod, shape: SandboxPodShape): PodAddition[] {
  const statuses = new Map((pod.status?.initContainerStatuses ?? []).map((status) => [status.name, status]));
  const recorded = shape.admitted !== undefined && shape.admitted.uid === pod.metadata?.uid ? shape.admitted.images : undefined;
  const changed: PodAddition[] = [];
  for (const container of pod.spec?.initContainers ?? []) {
    const built = shape.initContainers.get(container.name);
    if (!built) continue;
    const where = { container: container.name };
    const status = statuses.get(container.name);
    const ran = status !== undefined && (status.state?.running !== undefined || status.state?.terminated !== undefined);
    const ranBefore = status !== undefined && (status.restartCount > 0 || status.lastState?.terminated !== undefined);
    if (ranBefore) changed.push({ kind: 'restart', name: String(Math.max(status.restartCount, 1)), ...where });
    if (!ran) {
      if (!ranBefore && pastInit(pod))
        changed.push({
          kind: 'initContainer',
          name: container.name,
          detail: 'the pod is past its init containers and the kubelet reports no run of it',
        });
      continue;
    }
    const exitCode = status.state?.terminated?.exitCode;
    if (exitCode !== undefined && exitCode !== 0)
      changed.push({ kind: 'initContainer', name: container.name, detail: `it exited ${exitCode}` });
    const images = [...built.images];
    // Not the spec's image: whoever patched the image in can patch it back to the operator's
    // repository at the digest of what ran, which the spec check takes on a run with no record.
    const known = [...images, recorded?.get(container.name)];
    if (!images.some((image) => ranFrom(status.image, image) || ranFrom(status.imageID, image)) && !ranKnownDigest(status, known))
      changed.push({
        kind: 'image',
        name: shortField(status.image || status.imageID || 'none'),
        ...where,
        detail: `the kubelet ran it from this image; the operator builds ${images.map((image) => shortField(image)).join(' or ')}`,
      });
  }
  return changed;
}
