// Whether the sandbox pod the API server admitted is the pod the operator asked for, in every
// part of its spec that can carry a credential into the sandbox. Mutating admission webhooks
// run after the operator builds the pod and never read automountServiceAccountToken: EKS's
// pod-identity webhook (IRSA) adds a projected service-account token (audience
// sts.amazonaws.com) and AWS_ROLE_ARN / AWS_WEB_IDENTITY_TOKEN_FILE to every pod whose
// ServiceAccount carries eks.amazonaws.com/role-arn, the namespace's `default` one included;
// sidecar injectors add containers and their tokens. Code in the sandbox reads whatever is
// there, so the worker runs this check on the pod it reads before every exec session
// (sandbox/kubernetes-exec-transport.ts) and runs nothing in a pod that fails it.
//
// What may be there is derived from the builders (sandbox-pod.ts, which warm-pool.ts builds
// on), never listed by hand: a volume, mount, variable or container the builders add is
// allowed as soon as they add it. Pure.
import type { V1Container, V1Pod, V1Volume } from '@kubernetes/client-node';
import type { ParsedCodingRun } from '../api/index.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import { EGRESS_ENV_NAMES, wantsEgress } from './sandbox-egress.ts';
import { buildSandboxPod } from './sandbox-pod.ts';

const NAME_LABEL = 'app.kubernetes.io/name';

/** What one of the operator's containers may carry. */
export interface ContainerShape {
  /** Variables the builders set, each with a literal value. */
  env: ReadonlySet<string>;
  /** Mounts as `volume:path`. */
  mounts: ReadonlySet<string>;
}

/** The parts of the operator's sandbox pods a credential could ride in, by name. */
export interface SandboxPodShape {
  /** Volume name → its source (every volume of the operator's is an emptyDir). */
  volumes: ReadonlyMap<string, string>;
  containers: ReadonlyMap<string, ContainerShape>;
  initContainers: ReadonlyMap<string, ContainerShape>;
  /** The sandbox pods' app.kubernetes.io/name label: what an admin excludes from a webhook. */
  nameLabel: string;
}

/** Something the admitted pod carries that the operator did not put there. */
export interface PodAddition {
  kind:
    | 'automountServiceAccountToken'
    | 'volume'
    | 'container'
    | 'initContainer'
    | 'ephemeralContainer'
    | 'env'
    | 'envFrom'
    | 'volumeMount'
    | 'volumeDevice';
  name: string;
  /** The container it is in (env, envFrom, volumeMount, volumeDevice). */
  container?: string;
  /** What it is: a volume's source, where a mount goes, where a variable's value comes from. */
  detail?: string;
}

const mountKey = (name: string, path: string) => `${name}:${path}`;

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
  };
}

function addContainers(into: Map<string, ContainerShape>, containers: readonly V1Container[] | undefined): void {
  for (const container of containers ?? []) {
    const shape = containerShape(container);
    const known = into.get(container.name);
    into.set(
      container.name,
      known ? { env: new Set([...known.env, ...shape.env]), mounts: new Set([...known.mounts, ...shape.mounts]) } : shape,
    );
  }
}

/** The union of what the given built pods carry. */
export function podShapeOf(pods: readonly V1Pod[], extraEnv: readonly string[] = []): SandboxPodShape {
  const volumes = new Map<string, string>();
  const containers = new Map<string, ContainerShape>();
  const initContainers = new Map<string, ContainerShape>();
  for (const pod of pods) {
    for (const volume of pod.spec?.volumes ?? []) volumes.set(volume.name, sourceKind(volume));
    addContainers(containers, pod.spec?.containers);
    addContainers(initContainers, pod.spec?.initContainers);
  }
  for (const [name, shape] of containers) containers.set(name, { ...shape, env: new Set([...shape.env, ...extraEnv]) });
  return { volumes, containers, initContainers, nameLabel: pods[0]?.metadata?.labels?.[NAME_LABEL] ?? 'chamvi-sandbox' };
}

/**
 * What the run's sandbox pod may carry: what the operator builds for it now, and what it
 * would have built under the config it may have had when it made the pod (the pod outlives an
 * operator upgrade): with a custom image (an init container and a volume that copy node and
 * the toolbox in, which the run got if config.sandboxImage was another image then), and, for a
 * run with egress, the proxy's variables (sandbox-egress.ts; unset when the builder is given
 * no proxy address, as the workers are). A claimed warm pool pod is the run's own pod
 * (warmPoolFor compares them), so this covers it too.
 */
export function sandboxPodShape(run: ParsedCodingRun, config: OperatorConfig): SandboxPodShape {
  const customImageRun = { ...run, spec: { ...run.spec, sandbox: { ...run.spec.sandbox, image: 'any/custom-image' } } } as ParsedCodingRun;
  const customImage = buildSandboxPod(customImageRun, { ...config, sandboxImage: 'any/default-image' });
  return podShapeOf([buildSandboxPod(run, config), customImage], wantsEgress(run) ? EGRESS_ENV_NAMES : []);
}

function containerAdditions(container: V1Container, allowed: ContainerShape): PodAddition[] {
  const added: PodAddition[] = [];
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
      added.push({ kind: 'volumeMount', name: mount.name, ...where, detail: mount.mountPath });
    }
  }
  for (const device of container.volumeDevices ?? []) added.push({ kind: 'volumeDevice', name: device.name, ...where });
  return added;
}

/**
 * What the admitted pod carries that the operator's pods never do; empty when nothing. Fields
 * the API server defaults (dnsPolicy, terminationMessagePath, serviceAccountName `default`,
 * tolerations, imagePullSecrets, which stay outside the containers) carry nothing into the
 * sandbox and are not looked at; with automountServiceAccountToken false, the ServiceAccount
 * admission adds no token volume.
 */
export function podAdditions(admitted: V1Pod, shape: SandboxPodShape): PodAddition[] {
  const spec = admitted.spec;
  const added: PodAddition[] = [];
  if (spec?.automountServiceAccountToken !== false) {
    added.push({ kind: 'automountServiceAccountToken', name: String(spec?.automountServiceAccountToken ?? 'unset') });
  }
  for (const volume of spec?.volumes ?? []) {
    if (shape.volumes.get(volume.name) !== sourceKind(volume))
      added.push({ kind: 'volume', name: volume.name, detail: describeSource(volume) });
  }
  for (const container of spec?.containers ?? []) {
    const allowed = shape.containers.get(container.name);
    if (allowed) added.push(...containerAdditions(container, allowed));
    else added.push({ kind: 'container', name: container.name, detail: container.image });
  }
  for (const container of spec?.initContainers ?? []) {
    const allowed = shape.initContainers.get(container.name);
    if (allowed) added.push(...containerAdditions(container, allowed));
    else added.push({ kind: 'initContainer', name: container.name, detail: container.image });
  }
  for (const container of spec?.ephemeralContainers ?? []) {
    added.push({ kind: 'ephemeralContainer', name: container.name, detail: container.image });
  }
  return added;
}

const KIND_WORDS: Record<PodAddition['kind'], string> = {
  automountServiceAccountToken: 'automountServiceAccountToken',
  volume: 'volume',
  container: 'container',
  initContainer: 'init container',
  ephemeralContainer: 'ephemeral container',
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
  return `${words}${addition.detail ? ` (${addition.detail})` : ''}${where}`;
}

/** How many additions a message names; a sidecar injector adds dozens, and the status message is bounded. */
const NAMED = 8;

/** What EKS's pod-identity webhook (IRSA) leaves: then the message says exactly what to change. */
const isIrsa = (added: readonly PodAddition[]) =>
  added.some((addition) => addition.name === 'AWS_ROLE_ARN' || addition.name === 'AWS_WEB_IDENTITY_TOKEN_FILE');

/** The run's status message for a pod that carries `added`: what was added, why nothing ran, what to change. */
export function podChangedMessage(pod: { namespace: string; name: string }, added: readonly PodAddition[], shape: SandboxPodShape): string {
  const named = added.slice(0, NAMED).map(describeAddition).join(', ');
  const more = added.length > NAMED ? ` and ${added.length - NAMED} more` : '';
  const exclude = `exclude pods labelled ${NAME_LABEL}=${shape.nameLabel} from the webhook`;
  const fix = isIrsa(added)
    ? `remove the eks.amazonaws.com/role-arn annotation from the namespace's default ServiceAccount (EKS IRSA), or ${exclude}`
    : exclude;
  return (
    `The sandbox pod ${pod.namespace}/${pod.name} carries what the operator never puts in a sandbox: ${named}${more}. ` +
    "Any of it can hand the run's code a credential, so nothing was run in the pod. " +
    `A mutating admission webhook added it (an ephemeral container: kubectl debug): ${fix}; then create the run again.`
  );
}
