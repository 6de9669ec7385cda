// Whether the sandbox pod the API server admitted, as it is now, is the pod the operator asked
// for: in every part of its spec that can carry a credential into the sandbox, and in every
// part that decides what runs there and with which rights. Mutating admission webhooks run
// after the operator builds the pod and never read automountServiceAccountToken: EKS's
// pod-identity webhook (IRSA) adds a projected service-account token (audience
// sts.amazonaws.com) and AWS_ROLE_ARN / AWS_WEB_IDENTITY_TOKEN_FILE to every pod whose
// ServiceAccount carries eks.amazonaws.com/role-arn, the namespace's `default` one included;
// sidecar injectors add containers and their tokens. And a container's image is the one field
// of a running pod's containers a patch can change (`kubectl set image`): the kubelet then
// restarts the container from the new image, keeping the emptyDirs, so the run's workspace and
// tool calls would go to an image nobody allowed (security #11.10). Code in the sandbox reads
// whatever is there, so the worker runs this check on the pod it reads before every exec
// session (sandbox/kubernetes-exec-transport.ts) and runs nothing in a pod that fails it.
//
// What may be there is derived from the builders (sandbox-pod.ts, which warm-pool.ts builds
// on), never listed by hand: a volume, mount, variable, container, image, command, probe,
// lifecycle hook or security setting the builders make is allowed as soon as they make it. Each container's image must
// also still be the one the API server admitted, where the run's status records it
// (status.admittedPod, admitted-pod-record.ts). Pure.
import type { V1Container, V1Pod, V1PodSpec, V1Volume } from '@kubernetes/client-node';
import { admittedPodStatus, type CodingRunStatus, type ParsedCodingRun } from '../api/index.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import { canonicalJson } from './canonical-json.ts';
import { admittedForm, imageRepository, normalizeImage } from './image-reference.ts';
import { unchangedSinceCreation } from './admitted-pod-record.ts';
import { initContainerRuns } from './init-container-runs.ts';
import { EGRESS_ENV_NAMES, wantsEgress } from './sandbox-egress.ts';
import { buildSandboxPod } from './sandbox-pod.ts';
import { securityContextChanges } from './security-context-changes.ts';
import { shortField } from './short-field.ts';

const NAME_LABEL = 'app.kubernetes.io/name';

/** What one of the operator's containers may carry, and what it runs. */
export interface ContainerShape {
  /** Variables the builders set, each with a literal value. */
  env: ReadonlySet<string>;
  /** Mounts as `volume:path`. */
  mounts: ReadonlySet<string>;
  /** Images the builders give it (and, for SandboxPodShape.operatorImage, any tag of its repository). */
  images: ReadonlySet<string>;
  /** Its command and args as each builder sets them, the pair as canonical JSON. */
  commands: ReadonlySet<string>;
  /** Its imagePullPolicy as the builders set it; empty when they leave it to the API server's default. */
  pullPolicies: ReadonlySet<string>;
  /** Its securityContext as each builder sets it. */
  securityContexts: readonly V1Container['securityContext'][];
  /** Each of its probes and its lifecycle hooks as each builder sets them (hookKey): the builders set none. */
  hooks: ReadonlySet<string>;
}

/**
 * The fields of a container through which the kubelet runs commands in it, or sends requests to
 * it, with no exec session and no check before: an exec probe runs its command in the container
 * every period, a postStart or preStop hook once. A pod carrying one the operator did not put
 * there runs its maker's command beside the run's tools, in the run's workspace: a readiness
 * probe that tars /workspace into its output (which the kubelet keeps in the pod's Events), a
 * postStart hook that edits the files the agent is about to read.
 */
const HOOK_FIELDS = ['readinessProbe', 'livenessProbe', 'startupProbe', 'lifecycle'] as const;
type HookField = (typeof HOOK_FIELDS)[number];

/** The pod-level fields that decide as whom, and with which of the node's namespaces, the pod's processes run. */
export type PodSettings = Pick<
  V1PodSpec,
  'securityContext' | 'hostNetwork' | 'hostPID' | 'hostIPC' | 'serviceAccountName' | 'runtimeClassName'
>;

/** The parts of the operator's sandbox pods a credential could ride in, or that decide what runs there, by name. */
export interface SandboxPodShape {
  /** Volume name → its source (every volume of the operator's is an emptyDir). */
  volumes: ReadonlyMap<string, string>;
  containers: ReadonlyMap<string, ContainerShape>;
  initContainers: ReadonlyMap<string, ContainerShape>;
  /** Each builder's pod-level settings: the admitted pod must have one builder's. */
  podSettings: readonly PodSettings[];
  /**
   * The operator's sandbox image (config.sandboxImage): where a builder gives a container this
   * image, any tag or digest of its repository passes too. A run's pod outlives an operator
   * upgrade that moves the default image to a new tag, and every image in that repository is
   * the operator's own, so none of them is an image of someone else's choosing.
   */
  operatorImage?: string;
  /**
   * The name the builders give the run's own pod. Any other pod the run is given is a claimed
   * warm pool pod, whose spec the claim changed once (it adds activeDeadlineSeconds, which a
   * pool pod never has: the claim tests for it).
   */
  podName?: string;
  /** The sandbox pods' app.kubernetes.io/name label: what an admin excludes from a webhook. */
  nameLabel: string;
  /** The run's pod as the API server admitted it, where the run's status records it (status.admittedPod). */
  admitted?: AdmittedImages;
}

/** Each container's image as the API server admitted the pod of this uid. */
export interface AdmittedImages {
  uid: string;
  /** Container or init container name → its image. */
  images: ReadonlyMap<string, string>;
}

/** Something the admitted pod carries that the operator did not put there: an addition, or one of its own fields with another value. */
export interface PodAddition {
  kind:
    | 'automountServiceAccountToken'
    | 'hostNetwork'
    | 'hostPID'
    | 'hostIPC'
    | 'serviceAccountName'
    | 'runtimeClassName'
    | 'podSecurityContext'
    | 'volume'
    | 'container'
    | 'initContainer'
    | 'ephemeralContainer'
    | 'image'
    | 'imagePullPolicy'
    | 'command'
    | 'securityContext'
    | 'probe'
    | 'lifecycle'
    | 'restart'
    | 'env'
    | 'envFrom'
    | 'volumeMount'
    | 'volumeDevice';
  /** What was added, or the changed field's value (`privileged true` for a security context). */
  name: string;
  /** The container it is in (env, envFrom, volumeMount, volumeDevice, image, imagePullPolicy, command, securityContext, probe, lifecycle, restart). */
  container?: string;
  /** What it is: a volume's source, where a mount goes, where a variable's value comes from, what the operator set. */
  detail?: string;
}

const mountKey = (name: string, path: string) => `${name}:${path}`;
const commandKey = (container: V1Container) => canonicalJson({ command: container.command, args: container.args });
/** A probe or the lifecycle as a builder sets it, absent included (null and absent read alike). */
const hookKey = (field: HookField, value: unknown) => `${field}=${canonicalJson(value ?? undefined)}`;
const hookKeys = (container: V1Container) => HOOK_FIELDS.map((field) => hookKey(field, container[field]));
const theOperators = (values: Iterable<unknown>) =>
  `the operator's pod has ${[...values].map((value) => (value === undefined ? 'none' : String(value))).join(' or ') || 'none'}`;

/** The volume's source kind (emptyDir, projected, secret, csi, hostPath, ...). */
function sourceKind(volume: V1Volume): string {
  const kinds = Object.entries(volume)
    .filter(([key, value]) => key !== 'name' && value !== undefined && value !== null)
    .map(([key]) => key);
  return kinds.length > 0 ? kinds.join('+') : 'no source';
}

/** A volume's source in words, naming what it reads (a token's audience, a Secret's name, a host path). */
function describeSource(volume: V1Volume): string {
  if (volume.projected) {
    const sources = (volume.projected.sources ?? []).map((source) => {
      if (source.serviceAccountToken) return `service-account token, audience ${source.serviceAccountToken.audience ?? 'the API server'}`;
      if (source.secret) return `Secret ${source.secret.name ?? ''}`.trim();
      if (source.configMap) return `ConfigMap ${source.configMap.name ?? ''}`.trim();
      if (source.clusterTrustBundle) return 'cluster trust bundle';
      if (source.downwardAPI) return 'downward API';
      return Object.keys(source).join('+');
    });
    return `projected: ${sources.join(', ') || 'no sources'}`;
  }
  if (volume.secret) return `Secret ${volume.secret.secretName ?? ''}`.trim();
  if (volume.configMap) return `ConfigMap ${volume.configMap.name ?? ''}`.trim();
  if (volume.hostPath) return `hostPath ${volume.hostPath.path}`;
  if (volume.csi) return `CSI driver ${volume.csi.driver}`;
  return sourceKind(volume);
}

function containerShape(container: V1Container): ContainerShape {
  return {
    env: new Set((container.env ?? []).map((variable) => variable.name)),
    mounts: new Set((container.volumeMounts ?? []).map((mount) => mountKey(mount.name, mount.mountPath))),
    images: new Set(container.image === undefined ? [] : [container.image]),
    commands: new Set([commandKey(container)]),
    pullPolicies: new Set(container.imagePullPolicy === undefined ? [] : [container.imagePullPolicy]),
    securityContexts: [container.securityContext],
    hooks: new Set(hookKeys(container)),
  };
}

function unionShapes(known: ContainerShape, shape: ContainerShape): ContainerShape {
  const contexts = new Map([...known.securityContexts, ...shape.securityContexts].map((context) => [canonicalJson(context), context]));
  return {
    env: new Set([...known.env, ...shape.env]),
    mounts: new Set([...known.mounts, ...shape.mounts]),
    images: new Set([...known.images, ...shape.images]),
    commands: new Set([...known.commands, ...shape.commands]),
    pullPolicies: new Set([...known.pullPolicies, ...shape.pullPolicies]),
    securityContexts: [...contexts.values()],
    hooks: new Set([...known.hooks, ...shape.hooks]),
  };
}

function addContainers(into: Map<string, ContainerShape>, containers: readonly V1Container[] | undefined): void {
  for (const container of containers ?? []) {
    const shape = containerShape(container);
    const known = into.get(container.name);
    into.set(container.name, known ? unionShapes(known, shape) : shape);
  }
}

/** The union of what the given built pods carry. */
export function podShapeOf(
  pods: readonly V1Pod[],
  options: { extraEnv?: readonly string[]; operatorImage?: string } = {},
): SandboxPodShape {
  const volumes = new Map<string, string>();
  const containers = new Map<string, ContainerShape>();
  const initContainers = new Map<string, ContainerShape>();
  for (const pod of pods) {
    for (const volume of pod.spec?.volumes ?? []) volumes.set(volume.name, sourceKind(volume));
    addContainers(containers, pod.spec?.containers);
    addContainers(initContainers, pod.spec?.initContainers);
  }
  const extraEnv = options.extraEnv ?? [];
  for (const [name, shape] of containers) containers.set(name, { ...shape, env: new Set([...shape.env, ...extraEnv]) });
  const podSettings = pods.map(({ spec }): PodSettings => ({
    securityContext: spec?.securityContext,
    hostNetwork: spec?.hostNetwork,
    hostPID: spec?.hostPID,
    hostIPC: spec?.hostIPC,
    serviceAccountName: spec?.serviceAccountName,
    runtimeClassName: spec?.runtimeClassName,
  }));
  return {
    volumes,
    containers,
    initContainers,
    podSettings,
    ...(options.operatorImage === undefined ? {} : { operatorImage: options.operatorImage }),
    ...(pods[0]?.metadata?.name === undefined ? {} : { podName: pods[0].metadata.name }),
    nameLabel: pods[0]?.metadata?.labels?.[NAME_LABEL] ?? 'chamvi-sandbox',
  };
}

/** Stands for config.sandboxImage as it may have been when the pod was made; read back as the current one (operatorImage). */
const EARLIER_SANDBOX_IMAGE = 'earlier.invalid/chamvi-sandbox';

function withImage(pod: V1Pod, from: string, to: string): V1Pod {
  const swap = (containers: V1Container[]) =>
    containers.map((container) => (container.image === from ? { ...container, image: to } : container));
  const spec = pod.spec!;
  return { ...pod, spec: { ...spec, containers: swap(spec.containers), initContainers: swap(spec.initContainers ?? []) } };
}

/**
 * What the run's sandbox pod may carry and run: what the operator builds for it now, and what
 * it would have built under the config it may have had when it made the pod (the pod outlives
 * an operator upgrade): with a custom image (an init container and a volume that copy node and
 * the toolbox in from the operator's image, which the run got if config.sandboxImage was
 * another image then), the plain pod for a run that named the sandboxImage of the time (another
 * tag of the operator's repository), and, for a run with egress, the proxy's variables (sandbox-egress.ts;
 * unset when the builder is given no proxy address, as the workers are). The run's own image
 * is compared as the runtime reads it (image-reference.ts: however spelled, or pinned to a digest at
 * admission); the operator's image at any tag (operatorImage). A claimed warm pool pod is the run's own
 * pod (warmPoolFor compares them), so this covers it too. With the run's status.admittedPod, each
 * image must also be the one recorded.
 */
export function sandboxPodShape(run: ParsedCodingRun, config: OperatorConfig): SandboxPodShape {
  const image = run.spec.sandbox.image ?? config.sandboxImage;
  const customImageRun = { ...run, spec: { ...run.spec, sandbox: { ...run.spec.sandbox, image } } } as ParsedCodingRun;
  const customImage = withImage(
    buildSandboxPod(customImageRun, { ...config, sandboxImage: EARLIER_SANDBOX_IMAGE }),
    EARLIER_SANDBOX_IMAGE,
    config.sandboxImage,
  );
  const pods = [buildSandboxPod(run, config), customImage];
  // A run that named the sandboxImage of the time, in flight across an upgrade that moved
  // sandboxImage to another tag: its pod is the plain one (IfNotPresent, the image's own
  // entrypoint), which the builder now makes only for the new tag. Only within the operator's
  // repository, whose images are all the operator's own, as for operatorImage.
  const named = run.spec.sandbox.image;
  if (named !== undefined && named !== config.sandboxImage && imageRepository(named) === imageRepository(config.sandboxImage)) {
    pods.push(buildSandboxPod(run, { ...config, sandboxImage: named }));
  }
  const shape = podShapeOf(pods, {
    extraEnv: wantsEgress(run) ? EGRESS_ENV_NAMES : [],
    operatorImage: config.sandboxImage,
  });
  const admitted = admittedImagesOf(run.status);
  return admitted ? { ...shape, admitted } : shape;
}

/** status.admittedPod as the workers read it; a record that is not one (an older or foreign write) is none. */
export function admittedImagesOf(status: CodingRunStatus | undefined): AdmittedImages | undefined {
  const record = admittedPodStatus.safeParse(status?.admittedPod);
  if (!record.success) return undefined;
  return { uid: record.data.uid, images: new Map(record.data.images.map(({ container, image }) => [container, image])) };
}

/**
 * Whether nobody but the operator changed the pod's spec since it was created, so a digest on a
 * built image was added at admission: what is left to go by where the run's status records no
 * admitted images (a pod given by an operator from before status.admittedPod, or changed
 * before the operator first saw it). The API server counts spec changes in metadata.generation
 * (1 at creation, whatever admission mutated; users cannot set it). A patch of the image is not
 * always seen by restarts(): on a pod whose container has not started yet (pulling, in
 * ImagePullBackOff, a warm pool pod not yet run) the kubelet starts it from the patched image,
 * restartCount 0, so `IMAGE@sha256:<any build of the repository>` would run an image nobody
 * allowed. API servers before 1.33 leave generation unset for pods: there a digest is accepted
 * and that patch is not told apart (docs/operations.md).
 */
function specUnchangedSinceCreation(admitted: V1Pod, shape: SandboxPodShape): boolean {
  return unchangedSinceCreation(admitted, shape.podName) ?? true;
}

/** Whether some built image is `image` pinned to a digest (which counts only if added at admission). */
const isPinnedBuiltImage = (image: string, allowed: ReadonlySet<string>) =>
  [...allowed].some((built) => admittedForm(image, built) === 'pinned');

function isAllowedImage(
  image: string | undefined,
  allowed: ReadonlySet<string>,
  operatorImage: string | undefined,
  digestAdded: boolean,
): boolean {
  if (image === undefined) return false;
  if (allowed.has(image)) return true;
  // A built image however a webhook spells it (docker.io/library/ spelled out) is that image.
  // Pinned to a digest at admission it is the very image its tag named then: pinning narrows
  // what runs. Pinned later, by a patch, it may be any build of the repository. A built image
  // that already has a digest must keep it.
  if ([...allowed].some((built) => admittedForm(image, built) === 'same')) return true;
  if (digestAdded && isPinnedBuiltImage(image, allowed)) return true;
  return (
    operatorImage !== undefined &&
    allowed.has(operatorImage) &&
    normalizeImage(image) !== undefined &&
    imageRepository(image) === imageRepository(operatorImage)
  );
}

/** The candidate with the fewest changes: a pod matches when it matches any one builder's. */
const fewest = <T>(candidates: readonly T[][]): T[] =>
  candidates.reduce<T[] | undefined>((best, each) => (best === undefined || each.length < best.length ? each : best), undefined) ?? [];

/** How the container differs from the builders' in what it runs and with which rights. */
function containerChanges(container: V1Container, allowed: ContainerShape, images: ImageRules): PodAddition[] {
  const changed: PodAddition[] = [];
  const where = { container: container.name };
  const recorded = images.recorded?.get(container.name);
  if (images.recorded && container.image !== recorded) {
    // Not the image the API server admitted: patched since (kubectl set image).
    changed.push({
      kind: 'image',
      name: shortField(container.image ?? 'none'),
      ...where,
      detail: `the API server admitted ${recorded === undefined ? 'no such container' : shortField(recorded)}`,
    });
  } else if (!isAllowedImage(container.image, allowed.images, images.operatorImage, images.digestAdded)) {
    const pinned = !images.digestAdded && isPinnedBuiltImage(container.image ?? '', allowed.images);
    const patched = pinned ? `; ${images.specChanged}` : '';
    changed.push({
      kind: 'image',
      name: shortField(container.image ?? 'none'),
      ...where,
      detail: `${theOperators(allowed.images)}${patched}`,
    });
  }
  // Always only adds a check (the AlwaysPullImages admission plugin sets it on every container);
  // any other policy on a container the builders pull Always skips the registry's (security #11.10).
  const policy = container.imagePullPolicy;
  if (policy !== 'Always' && allowed.pullPolicies.size > 0 && !allowed.pullPolicies.has(policy ?? '')) {
    changed.push({ kind: 'imagePullPolicy', name: shortField(policy ?? 'none'), ...where, detail: theOperators(allowed.pullPolicies) });
  }
  if (!allowed.commands.has(commandKey(container))) {
    changed.push({
      kind: 'command',
      name: shortField(`${JSON.stringify(container.command ?? [])} ${JSON.stringify(container.args ?? [])}`),
      ...where,
    });
  }
  const security = fewest(allowed.securityContexts.map((made) => securityContextChanges(container.securityContext, made)));
  for (const change of security) changed.push({ kind: 'securityContext', name: change.field, ...where, detail: change.made });
  for (const field of HOOK_FIELDS) {
    if (!allowed.hooks.has(hookKey(field, container[field]))) changed.push(...hookChanges(field, container, allowed));
  }
  return changed;
}

/** A probe, or each lifecycle hook, of the container that the builders do not set so. */
function hookChanges(field: HookField, container: V1Container, allowed: ContainerShape): PodAddition[] {
  const where = { container: container.name };
  const operators = [...allowed.hooks].filter((key) => key.startsWith(`${field}=`)).map((key) => key.slice(field.length + 1));
  const theirs = `the operator's pod has ${operators.map((each) => (each === 'undefined' ? 'none' : shortField(each))).join(' or ')}`;
  if (field !== 'lifecycle') {
    const probe = container[field];
    return [{ kind: 'probe', name: field, ...where, detail: probe ? `${describeHandler(probe)}; ${theirs}` : theirs }];
  }
  const hooks = Object.entries(container.lifecycle ?? {}).filter(([, value]) => value !== undefined && value !== null);
  if (hooks.length === 0) return [{ kind: 'lifecycle', name: 'lifecycle', ...where, detail: theirs }];
  return hooks.map(([hook, value]) => ({
    kind: 'lifecycle' as const,
    name: hook,
    ...where,
    detail: typeof value === 'object' ? describeHandler(value as Handler) : shortField(String(value)),
  }));
}

/** A probe's or a hook's handler. */
type Handler = {
  exec?: { command?: string[] };
  httpGet?: { path?: string; port?: unknown };
  tcpSocket?: { port?: unknown };
  grpc?: { port?: unknown };
  sleep?: { seconds?: number };
};

/** What a probe or hook does, in words: an exec's command, a request's port and path; cut short (its maker chose it). */
function describeHandler(handler: Handler): string {
  if (handler.exec) return shortField(`exec ${JSON.stringify(handler.exec.command ?? [])}`);
  if (handler.httpGet) return shortField(`httpGet ${String(handler.httpGet.port)}${handler.httpGet.path ?? ''}`);
  if (handler.tcpSocket) return shortField(`tcpSocket ${String(handler.tcpSocket.port)}`);
  if (handler.grpc) return shortField(`grpc ${String(handler.grpc.port)}`);
  if (handler.sleep) return `sleep ${handler.sleep.seconds}s`;
  return shortField(Object.keys(handler).join('+') || 'no handler');
}

/** What a container's image is checked against: the operator's repository, and whether a digest may have been added at admission. */
interface ImageRules {
  operatorImage: string | undefined;
  /** Each container's image as admitted, when the run's status records it for this pod: then each image must be the recorded one. */
  recorded?: ReadonlyMap<string, string>;
  /** Whether a digest on a built image was added at admission: recorded, or no spec change since creation. */
  digestAdded: boolean;
  /** Why a digest is not taken as added at admission, for the message. */
  specChanged: string;
}

function containerAdditions(container: V1Container, allowed: ContainerShape, images: ImageRules): PodAddition[] {
  const added: PodAddition[] = containerChanges(container, allowed, images);
  const where = { container: container.name };
  for (const variable of container.env ?? []) {
    if (!allowed.env.has(variable.name)) added.push({ kind: 'env', name: variable.name, ...where });
    // The builders set literal values only: a value read from a Secret, a ConfigMap or the pod is not theirs.
    else if (variable.valueFrom)
      added.push({ kind: 'env', name: variable.name, ...where, detail: `from ${Object.keys(variable.valueFrom).join('+')}` });
  }
  for (const source of container.envFrom ?? []) {
    const from = source.secretRef
      ? `Secret ${source.secretRef.name}`
      : source.configMapRef
        ? `ConfigMap ${source.configMapRef.name}`
        : 'a source';
    added.push({ kind: 'envFrom', name: from, ...where });
  }
  for (const mount of container.volumeMounts ?? []) {
    if (!allowed.mounts.has(mountKey(mount.name, mount.mountPath))) {
      added.push({ kind: 'volumeMount', name: mount.name, ...where, detail: shortField(mount.mountPath) });
    }
  }
  for (const device of container.volumeDevices ?? []) added.push({ kind: 'volumeDevice', name: device.name, ...where });
  return added;
}

/**
 * What the API server puts in a field the builders leave unset: it defaults the ServiceAccount
 * to `default`; the host namespaces are off when absent.
 */
const POD_DEFAULTS = { hostNetwork: false, hostPID: false, hostIPC: false, serviceAccountName: 'default', runtimeClassName: undefined };
const POD_FIELDS = Object.keys(POD_DEFAULTS) as Array<keyof typeof POD_DEFAULTS>;

/** How the pod-level fields that decide as whom and where its processes run differ from the builders'. */
function podSettingChanges(spec: V1PodSpec | undefined, allowed: readonly PodSettings[]): PodAddition[] {
  const against = (made: PodSettings): PodAddition[] => {
    const changed: PodAddition[] = [];
    for (const field of POD_FIELDS) {
      const now = spec?.[field] ?? POD_DEFAULTS[field];
      const was = made[field] ?? POD_DEFAULTS[field];
      if (now !== was) changed.push({ kind: field, name: shortField(String(now ?? 'none')), detail: theOperators([was]) });
    }
    for (const change of securityContextChanges(spec?.securityContext, made.securityContext)) {
      changed.push({ kind: 'podSecurityContext', name: change.field, detail: change.made });
    }
    return changed;
  };
  return fewest(allowed.map(against));
}

/**
 * Containers of the operator's that started again: every pod the builders make has
 * restartPolicy Never, under which the kubelet restarts a container only when its spec
 * changed (a patched image), keeping the emptyDirs, so whatever ran from the other image
 * could have left files behind even if the image was patched back.
 */
function restarts(admitted: V1Pod, shape: SandboxPodShape): PodAddition[] {
  return (admitted.status?.containerStatuses ?? [])
    .filter((status) => shape.containers.has(status.name) && status.restartCount > 0)
    .map((status) => ({ kind: 'restart', name: String(status.restartCount), container: status.name }));
}

/** An image of a container the operator did not make, as its maker wrote it: cut short (short-field.ts). */
const imageDetail = (image: string | undefined) => (image === undefined ? undefined : shortField(image));

/**
 * What the admitted pod carries that the operator's pods never do, or has where they have
 * something else; empty when nothing. Only fields the builders set are compared (with the
 * API server's default where they leave one to it): fields the API server or admission fills
 * in (dnsPolicy, terminationMessagePath, tolerations, imagePullSecrets, resizePolicy, an
 * SELinux level) carry nothing into the sandbox and change nothing it may do, and are not
 * looked at; with automountServiceAccountToken false, the ServiceAccount admission adds no
 * token volume.
 */
export function podAdditions(admitted: V1Pod, shape: SandboxPodShape): PodAddition[] {
  const spec = admitted.spec;
  const added: PodAddition[] = [];
  // The record holds for the pod it was made of: another pod under the name (the run's owner
  // check passed) is judged as an unrecorded one.
  const recorded = shape.admitted !== undefined && shape.admitted.uid === admitted.metadata?.uid ? shape.admitted.images : undefined;
  const images: ImageRules = {
    operatorImage: shape.operatorImage,
    ...(recorded ? { recorded } : {}),
    // A recorded image is the admitted one by the record, not by the spec's generation: a spec
    // change that leaves the images alone (Kueue removing its scheduling gate, an in-place
    // resize) counts for nothing, and one that changes an image fails the comparison.
    digestAdded: recorded !== undefined || specUnchangedSinceCreation(admitted, shape),
    specChanged: `the pod's spec was changed after it was made (generation ${admitted.metadata?.generation})`,
  };
  if (spec?.automountServiceAccountToken !== false) {
    added.push({ kind: 'automountServiceAccountToken', name: String(spec?.automountServiceAccountToken ?? 'unset') });
  }
  added.push(...podSettingChanges(spec, shape.podSettings));
  for (const volume of spec?.volumes ?? []) {
    if (shape.volumes.get(volume.name) !== sourceKind(volume))
      added.push({ kind: 'volume', name: volume.name, detail: describeSource(volume) });
  }
  for (const container of spec?.containers ?? []) {
    const allowed = shape.containers.get(container.name);
    if (allowed) added.push(...containerAdditions(container, allowed, images));
    else added.push({ kind: 'container', name: container.name, detail: imageDetail(container.image) });
  }
  added.push(...restarts(admitted, shape));
  for (const container of spec?.initContainers ?? []) {
    const allowed = shape.initContainers.get(container.name);
    if (allowed) added.push(...containerAdditions(container, allowed, images));
    else added.push({ kind: 'initContainer', name: container.name, detail: imageDetail(container.image) });
  }
  // What the init containers the operator builds ran, by the kubelet's record: an image patched in
  // and back while the pod was Pending leaves the spec (and the run's record) as admitted.
  added.push(...initContainerRuns(admitted, shape));
  for (const container of spec?.ephemeralContainers ?? []) {
    added.push({ kind: 'ephemeralContainer', name: container.name, detail: imageDetail(container.image) });
  }
  return added;
}

const KIND_WORDS: Record<PodAddition['kind'], string> = {
  automountServiceAccountToken: 'automountServiceAccountToken',
  hostNetwork: 'hostNetwork',
  hostPID: 'hostPID',
  hostIPC: 'hostIPC',
  serviceAccountName: 'serviceAccountName',
  runtimeClassName: 'runtimeClassName',
  podSecurityContext: 'pod securityContext',
  volume: 'volume',
  container: 'container',
  initContainer: 'init container',
  ephemeralContainer: 'ephemeral container',
  image: 'image',
  imagePullPolicy: 'imagePullPolicy',
  command: 'command and args',
  securityContext: 'securityContext',
  probe: 'probe',
  lifecycle: 'lifecycle hook',
  restart: 'restarts',
  env: 'env',
  envFrom: 'envFrom',
  volumeMount: 'volume mount',
  volumeDevice: 'volume device',
};

export function describeAddition(addition: PodAddition): string {
  const words = `${KIND_WORDS[addition.kind]} ${addition.name}`;
  const where = addition.container ? ` in container ${addition.container}` : '';
  if (addition.kind === 'automountServiceAccountToken') return `automountServiceAccountToken ${addition.name} (the operator sets false)`;
  if (addition.kind === 'volumeMount') return `${words} at ${addition.detail}${where}`;
  if (addition.kind === 'restart')
    return `container ${addition.container} restarted ${addition.name} times (its image was changed while it ran)`;
  return `${words}${addition.detail ? ` (${addition.detail})` : ''}${where}`;
}

/** How many additions a message names; a sidecar injector adds dozens, and the status message is bounded. */
const NAMED = 8;

/** What EKS's pod-identity webhook (IRSA) leaves: then the message says exactly what to change. */
const isIrsa = (added: readonly PodAddition[]) =>
  added.some((addition) => addition.name === 'AWS_ROLE_ARN' || addition.name === 'AWS_WEB_IDENTITY_TOKEN_FILE');

/** What a patch of the running pod changes: a container's image, and the restart that follows. */
const PATCHED = new Set<PodAddition['kind']>(['image', 'restart']);

/** The run's status message for a pod that carries `added`: what was added or changed, why nothing ran, what to change. */
export function podChangedMessage(pod: { namespace: string; name: string }, added: readonly PodAddition[], shape: SandboxPodShape): string {
  const named = added.slice(0, NAMED).map(describeAddition).join(', ');
  const more = added.length > NAMED ? ` and ${added.length - NAMED} more` : '';
  const exclude = `exclude pods labelled ${NAME_LABEL}=${shape.nameLabel} from the webhook`;
  const fix = isIrsa(added)
    ? `remove the eks.amazonaws.com/role-arn annotation from the namespace's default ServiceAccount (EKS IRSA), or ${exclude}`
    : exclude;
  const causes: string[] = [];
  if (added.some((addition) => !PATCHED.has(addition.kind))) {
    causes.push(`A mutating admission webhook added or changed it (an ephemeral container: kubectl debug): ${fix}`);
  }
  if (added.some((addition) => PATCHED.has(addition.kind))) {
    causes.push(
      "Someone who may patch pods in the namespace changed the image of the running pod (kubectl set image; the API server's audit log " +
        "names them), or a webhook rewrote it at admission (a registry mirror's: name the mirror's image in sandboxImage or " +
        `spec.sandbox.image instead, or ${exclude})`,
    );
  }
  return (
    `The sandbox pod ${pod.namespace}/${pod.name} carries what the operator never puts in a sandbox: ${named}${more}. ` +
    "Any of it can hand the run's code a credential or rights the operator does not give it, or the run's workspace and tool " +
    'calls to an image nobody allowed, so nothing was run in the pod. ' +
    `${causes.join('. ')}; then create the run again.`
  );
}
