// What a sandbox pod's init containers ran, by what the kubelet reports (status.initContainerStatuses),
// not by the spec. The one the operator builds (chamvi-tools, for a custom image: it copies node and
// the toolbox the sandbox runs into an emptyDir) runs once, and the kubelet does not run it again when
// its image changes after: an image patched in while the pod is Pending and patched back once it
// exited leaves the built spec, the run's record of its admitted images matched again, and a rigged
// toolbox behind, which every exec then runs. The spec cannot tell; the status can (the image the
// kubelet ran, not the spec's now). admitted-pod.ts podAdditions applies it to every sandbox pod the
// operator judges: a run's own pod before every exec, a claimed pool pod, a pool pod, the isolation
// probe. A run's record of its pod keeps the digest its chamvi-tools first ran under the operator's
// repository (ranImageKey), so a pod judged by that name is not failed when the runtime names the
// image by another repository later. Pure.
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { PodAddition, SandboxPodShape } from './admitted-pod.ts';
import { normalizeImage } from './image-reference.ts';
import { shortField } from './short-field.ts';

/** dockershim's prefix on an imageID; containerd and CRI-O report the bare `repository@sha256:...`. */
const DOCKER_PULLABLE = 'docker-pullable://';

const reportedImage = (reported: string | undefined) =>
  reported ? normalizeImage(reported.startsWith(DOCKER_PULLABLE) ? reported.slice(DOCKER_PULLABLE.length) : reported) : undefined;

/**
 * The manifest digest in an imageID (`repository@sha256:...`), the repository dropped. A bare
 * `sha256:...` (an image with no repository digest on the node: loaded, not pulled) is the image's
 * config digest, another kind of digest, and none here.
 */
function reportedDigest(imageID: string | undefined): string | undefined {
  const reported = imageID?.startsWith(DOCKER_PULLABLE) ? imageID.slice(DOCKER_PULLABLE.length) : imageID;
  return reported?.includes('@') ? normalizeImage(reported)?.digest : undefined;
}

/**
 * The digests the operator knows an init container's image by: those its builders pin the image
 * to, and those in the run's record of its pod (the image the API server admitted, and the one the
 * kubelet first reported it ran under the operator's repository: ranImageKey). Never the digest of
 * an image the pod's spec or the run's spec names: whoever may patch the pod can patch its spec
 * back to the operator's repository at the digest of whatever ran, and a run names what it likes.
 */
export function knownDigests(built: Iterable<string>, ...recorded: Array<string | undefined>): ReadonlySet<string> {
  const digests = new Set<string>();
  for (const image of [...built, ...recorded]) {
    const digest = image === undefined ? undefined : normalizeImage(image)?.digest;
    if (digest !== undefined) digests.add(digest);
  }
  return digests;
}

/**
 * The key under which the run's record of its pod (status.admittedPod) keeps what an init container
 * ran (ranUnderRepository), beside its admitted image. Not a container name: those are DNS labels,
 * never with an `@`, so no container of the pod is compared with it.
 */
export const ranImageKey = (container: string): string => `${container}@ran`;

/**
 * The image (`repository@sha256:...`) the kubelet reports the init container ran, when it names it
 * by the operator's repository (`operatorImage`'s) in its imageID, digest and repository in one
 * reference: a build of the operator's, the only images there, and nothing a spec names. Recorded
 * for the pod (admitted-pod-record.ts withRanImages), its digest stays known when the runtime names
 * the image by another repository later (a copy another tenant pulled: ranImageVerdict). Undefined
 * before it ran, for a config digest (a bare `sha256:`), or under any other name, `image` included:
 * that is the runtime's name, not tied to the digest.
 */
export function ranUnderRepository(status: V1ContainerStatus, operatorImage: string): string | undefined {
  const ran = status.state?.running !== undefined || status.state?.terminated !== undefined;
  const named = ran ? reportedImage(status.imageID) : undefined;
  const digest = reportedDigest(status.imageID);
  if (named === undefined || digest === undefined || named.repository !== normalizeImage(operatorImage)?.repository) return undefined;
  return `${named.repository}@${digest}`;
}

/** What the kubelet's report says of the image an init container ran. */
export type RanImageVerdict =
  /** Nothing to judge yet: it has not run, or the kubelet names no image it ran (imageID empty). */
  | 'pending'
  /** Its digest is one the operator knows, under whatever repository name; or an image of the operator's repository. */
  | 'passes'
  /** Anything else. */
  | 'fails';

/** What an init container's image is judged against: the images the builders give it, and the digests the operator knows. */
export interface RanImageRule {
  built: readonly string[];
  known: ReadonlySet<string>;
}

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
 * The image an init container ran, judged by the kubelet's report of it. The digest first: one the
 * operator knows passes whatever repository the runtime names it by, since containerd names an
 * image by the first of its references on the node in lexical order, so a copy of the same image
 * another tenant pulled (docker.io/a/copy) names it for every pod there, from the moment it is
 * pulled (a verdict by name flips in the middle of a run, unless the run's record kept the digest
 * the pod first passed by name: ranUnderRepository). Then, strict, the name: an image of the
 * built repository (any of its tags or digests: every build there is the operator's); anything
 * else fails. With no imageID (kwok, and virtual kubelets, report none) the name alone judges it.
 */
export function ranImageVerdict(status: V1ContainerStatus | undefined, rule: RanImageRule): RanImageVerdict {
  const ran = status !== undefined && (status.state?.running !== undefined || status.state?.terminated !== undefined);
  if (!ran) return 'pending';
  const digest = reportedDigest(status.imageID);
  if (digest !== undefined && rule.known.has(digest)) return 'passes';
  return rule.built.some((image) => ranFrom(status.image, image) || ranFrom(status.imageID, image)) ? 'passes' : 'fails';
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
 * it ran, must have run an image ranImageVerdict passes, once, and exited 0; a pod past its init
 * containers with no such record (no run, or a run with no imageID) is not the operator's either.
 * Before one ran there is nothing to judge (a pool pod still Pending, a run pod pulling): the spec
 * check sees an image patched in now, and exec waits for the pod to be Ready, by when it has run.
 * It holds wherever the kubelet reports statuses, generation kept (1.33+) or not. An init container
 * the builders do not make is named by podAdditions already.
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
    const ranBefore = status !== undefined && (status.restartCount > 0 || status.lastState?.terminated !== undefined);
    if (ranBefore) changed.push({ kind: 'restart', name: String(Math.max(status.restartCount, 1)), ...where });
    const exitCode = status?.state?.terminated?.exitCode;
    if (exitCode !== undefined && exitCode !== 0)
      changed.push({ kind: 'initContainer', name: container.name, detail: `it exited ${exitCode}` });
    const images = [...built.images];
    // Not the spec's image: whoever patched the image in can patch it back to the operator's
    // repository at the digest of what ran, which the spec check takes on a run with no record.
    const known = knownDigests(images, recorded?.get(container.name), recorded?.get(ranImageKey(container.name)));
    const verdict = ranImageVerdict(status, { built: images, known });
    if (verdict === 'pending') {
      if (!ranBefore && pastInit(pod))
        changed.push({
          kind: 'initContainer',
          name: container.name,
          detail: 'the pod is past its init containers and the kubelet reports no run of it',
        });
    } else if (verdict === 'fails')
      changed.push({
        kind: 'image',
        name: shortField(status?.image || status?.imageID || 'none'),
        ...where,
        detail: `the kubelet ran it from this image; the operator builds ${images.map((image) => shortField(image)).join(' or ')}`,
      });
  }
  return changed;
}
