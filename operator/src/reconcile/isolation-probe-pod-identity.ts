// Security #11.8: whether the pod an isolation probe reads is still the pod it created, as the
// API server admitted it. A verdict is whatever the toolbox in the probe pod answers, and the
// pod is reached by name. A name is no proof: whoever may delete and create pods in the
// namespace can put a pod of their own under it, and whoever may patch pods can swap its image
// (the one field of a running container that can change); either toolbox can answer "blocked",
// and a forged `enforced` would start other authors' runs unisolated. So the probe reads its pod
// before and after every connection attempt (controller/isolation-probe.ts) and believes only
// an answer from between two reads that both pass this check: a uid is never given out again
// and a container restarted is a new container, so the exec between such reads went into the
// probe's own container. The spec's generation is not compared: honest changes bump it (Kueue
// removing its scheduling gate, an in-place resize, an ephemeral container, which is refused
// on its own), and an image patch is caught by the images, compared exactly. Pure.
import type { V1Pod } from '@kubernetes/client-node';
import { describeAddition, podAdditions, podShapeOf, type SandboxPodShape } from './admitted-pod.ts';
import { shortField } from './short-field.ts';

/** Characters of a field the reader chose that a reason quotes: the reason ends up in runs' messages, cut at 512. */
const QUOTED = 80;
const quote = (value: unknown) => shortField(value, QUOTED);

/** The probe pod as created: what every later read of it must still show. */
export interface ProbePodIdentity {
  /** The uid the API server gave the pod the probe created. */
  uid: string;
  /** Each container's and init container's image as admitted (a webhook may have rewritten the built one). */
  images: ReadonlyMap<string, string>;
  /** The admitted pod's shape (reconcile/admitted-pod.ts), and what it already carried beyond it. */
  shape: SandboxPodShape;
  admittedAdditions: ReadonlySet<string>;
  /** Each container's id and restart count once the pod was ready: a container started later (after an image patch) is not the one probed. */
  started?: ReadonlyMap<string, string>;
}

function imagesOf(pod: V1Pod): Map<string, string> {
  const containers = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])];
  return new Map(containers.map((container) => [container.name, container.image ?? '']));
}

function startedContainersOf(pod: V1Pod): Map<string, string> {
  return new Map(
    (pod.status?.containerStatuses ?? []).map((status) => [
      status.name,
      `${status.containerID ?? 'no id'}, restart ${status.restartCount}`,
    ]),
  );
}

/** The identity of the pod the API server answered the probe's create with. */
export function probePodIdentity(admitted: V1Pod): ProbePodIdentity {
  const shape = podShapeOf([admitted]);
  return {
    uid: admitted.metadata?.uid ?? '',
    images: imagesOf(admitted),
    shape,
    admittedAdditions: new Set(podAdditions(admitted, shape).map(describeAddition)),
  };
}

/** The identity with the containers the ready pod runs: from now on they must not be replaced. */
export function withStartedContainers(identity: ProbePodIdentity, ready: V1Pod): ProbePodIdentity {
  return { ...identity, started: startedContainersOf(ready) };
}

/**
 * Why the pod read under the probe pod's name is not the pod the probe created, unchanged; undefined
 * when it is. Strings the pod's writer chose (an image, a name) are cut short (short-field.ts).
 */
export function whyNotProbePod(read: V1Pod | undefined, identity: ProbePodIdentity): string | undefined {
  if (!read) return 'it is gone';
  const uid = read.metadata?.uid;
  if (uid !== identity.uid) return `another pod (uid ${quote(uid ?? 'none')}) has its name; the probe created uid ${identity.uid}`;
  if (read.metadata?.deletionTimestamp) return 'it is being deleted';
  // Exactly the images admitted: stricter than podAdditions below, which takes a digest pinned
  // to a built image while the pod's generation shows no change, and the operator's image at any
  // tag. The probe holds the pod as admitted, so it needs neither.
  const images = imagesOf(read);
  for (const name of new Set([...identity.images.keys(), ...images.keys()])) {
    if (images.get(name) !== identity.images.get(name)) {
      return `container ${quote(name)} runs image ${quote(images.get(name) ?? 'none')}, not ${quote(identity.images.get(name) ?? 'none')}`;
    }
  }
  const added = podAdditions(read, identity.shape)
    .map(describeAddition)
    .filter((addition) => !identity.admittedAdditions.has(addition));
  if (added.length > 0)
    return `it now carries ${added
      .slice(0, 3)
      .map((addition) => quote(addition))
      .join(', ')}`;
  if (identity.started) {
    const started = startedContainersOf(read);
    for (const [name, was] of identity.started) {
      if (started.get(name) !== was) return `container ${quote(name)} was started again since the probe began`;
    }
  }
  return undefined;
}
