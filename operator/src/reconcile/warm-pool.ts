// Warm sandbox pools: pods started ahead of any run, each handed to exactly one run, which
// then skips pod scheduling and start. Pure: the pool pod's template, whether a run may take
// a pool pod at all, whether a pod was ever claimed (claimMarks) and for which run (claimOf). A pod's spec is fixed
// once it exists (image, env, resources, service account, runtime class, volumes; only
// labels, owner references and activeDeadlineSeconds may change) and a pod never changes
// namespace, so a run may take a pool pod only when the pod it would get fresh is, apart from
// those, the very same pod.
import type { V1NetworkPolicy, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { isDeepStrictEqual } from 'node:util';
import { RUN_LABEL, RUN_UID_LABEL, codingRunSpec, type ParsedCodingRun } from '../api/index.ts';
import { podAdditions, podShapeOf, type PodAddition, type SandboxPodShape } from './admitted-pod.ts';
import { CLAIM_SEAL_ANNOTATION } from './warm-pool-claim-seal.ts';
import { jsonPointerSegment, labelPointer } from './json-pointer.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import { controllingRunUid } from './ownership.ts';
import { buildSandboxPod, ownerReference, runLabels } from './sandbox-pod.ts';

/** The label naming the pool of an unclaimed pool pod; a claim removes it (and so no second claim can test for it). */
export const WARM_POOL_LABEL = 'chamvi.dev/warm-pool';

/**
 * The label every pod of a pool carries from its creation for good, claimed or not: the
 * pool's deny-all NetworkPolicy selects it. A claim does not remove it, so a claimed pod
 * goes from "selected by the pool's deny-all" to "selected by the pool's deny-all and the
 * run's policy" (NetworkPolicies add up: the deny-all allows nothing, the run's policy
 * allows what it allows) and is never, not for a moment, selected by no policy at all.
 */
export const POOL_ISOLATION_LABEL = 'chamvi.dev/warm-pool-sandbox';

/** The label on a pool's deny-all NetworkPolicy naming its pool: how the pool loop knows the policy is its own. */
export const POOL_POLICY_LABEL = 'chamvi.dev/warm-pool-policy';

/** The label a claim puts on a pool pod: which pool it came from (status.timings SandboxClaimed, not PodReady). */
export const CLAIMED_FROM_LABEL = 'chamvi.dev/claimed-from-pool';

/**
 * What a claim leaves on a pod and a pool pod never has, each read from the pod and named by
 * the JSON Pointer a claim patch tests for absence: the operator's cache and the API server
 * refuse the same pods. The pool label alone says nothing: anyone who may label pods in the
 * namespace can put it back on a pod a run claimed (its processes and workspace in it), and
 * a pool pod the loop made keeps its uid. Labels and owners can be taken off again too, but
 * not activeDeadlineSeconds (the API server refuses to unset it): a claimed pod is never
 * a pool pod again, whatever is done to it after.
 */
const CLAIM_MARKS: ReadonlyArray<{ pointer: string; on: (pod: V1Pod) => boolean }> = [
  { pointer: '/metadata/ownerReferences', on: (pod) => (pod.metadata?.ownerReferences ?? []).length > 0 },
  ...[RUN_UID_LABEL, RUN_LABEL, CLAIMED_FROM_LABEL].map((key) => ({
    pointer: labelPointer(key),
    on: (pod: V1Pod) => pod.metadata?.labels?.[key] !== undefined,
  })),
  { pointer: '/spec/activeDeadlineSeconds', on: (pod) => pod.spec?.activeDeadlineSeconds != null },
];

/** The claim marks the pod carries, as JSON Pointers: none for a pod a run may claim. */
export function claimMarks(pod: V1Pod): string[] {
  return CLAIM_MARKS.filter((mark) => mark.on(pod)).map((mark) => mark.pointer);
}

/** One pool as the operator config declares it. */
export interface WarmPoolConfig {
  /** The pool's name, unique per namespace; its pods are named `<name>-warm-<random>`. */
  name: string;
  /** Pods cannot move namespace: a pool serves the runs of one namespace, and counts against its quota. */
  namespace: string;
  /** Ready pods kept unclaimed; 0 empties the pool. */
  size: number;
  /** The pool's image; unset is the operator's sandboxImage. */
  image?: string;
  /** The pool's RuntimeClass; unset is sandboxPlacement.runtimeClassName. */
  runtimeClassName?: string;
}

/** The fields of a run that shape its pod, reduced to what a pool pod was made with. */
function asPoolRun(run: ParsedCodingRun, pool: WarmPoolConfig): ParsedCodingRun {
  const sandbox = {
    ...run.spec.sandbox,
    image: pool.image,
    runtimeClassName: pool.runtimeClassName,
    resources: undefined,
    env: undefined,
    egress: { allow: [] },
  };
  return { ...run, spec: { ...run.spec, sandbox } } as ParsedCodingRun;
}

/**
 * The parts of a sandbox pod a claim cannot change, for comparing: the pod spec without
 * activeDeadlineSeconds (the claim sets it from the run's budget).
 */
function fixedSpec(pod: V1Pod): V1PodSpec {
  const { activeDeadlineSeconds: _deadline, ...spec } = pod.spec!;
  return spec;
}

/**
 * A pool's pod, built from a run template (any valid run: only its spec.sandbox shapes the
 * spec, and a pool pod carries nothing of it): the run's pod spec with no deadline, the
 * pool's label instead of a run's, no owner. `template` is a parsed run with default sandbox.
 */
export function warmPoolPod(pool: WarmPoolConfig, config: OperatorConfig, template: ParsedCodingRun): V1Pod {
  const built = buildSandboxPod(asPoolRun({ ...template, metadata: { ...template.metadata, namespace: pool.namespace } }, pool), config);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: `${pool.name}-warm-`,
      namespace: pool.namespace,
      labels: {
        'app.kubernetes.io/name': 'chamvi-sandbox',
        'app.kubernetes.io/managed-by': 'chamvi-operator',
        [WARM_POOL_LABEL]: pool.name,
        [POOL_ISOLATION_LABEL]: pool.name,
      },
    },
    spec: fixedSpec(built),
  };
}

/** The name of a pool's deny-all NetworkPolicy; run policies end in `-<hash>-sandbox`, so no run's can be it. */
export const warmPoolNetworkPolicyName = (pool: WarmPoolConfig) => `${pool.name}-warm-pool-deny-all`;

/**
 * The pool's deny-all NetworkPolicy: no ingress, no egress, for every pod of the pool. An
 * unclaimed pool pod runs no run's code and needs no network; a pod the CNI would otherwise
 * leave unselected (no run's labels yet) has open egress on a cluster that enforces
 * policies. The pool loop creates it before the pool's first pod. No owner: it outlives any
 * run, and a pool removed from the config leaves it behind (it only denies).
 */
export function warmPoolNetworkPolicy(pool: WarmPoolConfig): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: warmPoolNetworkPolicyName(pool),
      namespace: pool.namespace,
      labels: { 'app.kubernetes.io/managed-by': 'chamvi-operator', [POOL_POLICY_LABEL]: pool.name },
    },
    spec: {
      podSelector: { matchLabels: { [POOL_ISOLATION_LABEL]: pool.name } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    },
  };
}

/** Whether a NetworkPolicy is this pool's deny-all as the operator made it (and not a foreign object holding its name). */
export function isWarmPoolNetworkPolicy(policy: V1NetworkPolicy | undefined, pool: WarmPoolConfig): boolean {
  return (
    policy !== undefined &&
    policy.metadata?.namespace === pool.namespace &&
    policy.metadata?.name === warmPoolNetworkPolicyName(pool) &&
    policy.metadata?.labels?.[POOL_POLICY_LABEL] === pool.name &&
    isDeepStrictEqual(policy.spec?.podSelector?.matchLabels, { [POOL_ISOLATION_LABEL]: pool.name }) &&
    (policy.spec?.ingress ?? []).length === 0 &&
    (policy.spec?.egress ?? []).length === 0 &&
    (policy.spec?.policyTypes ?? []).includes('Ingress') &&
    (policy.spec?.policyTypes ?? []).includes('Egress')
  );
}

export type PoolMatch = { pool: WarmPoolConfig } | { pool: undefined; why: string };

/**
 * The pool whose pods are the pod this run would get fresh (same namespace, and the same
 * fixed spec: image, resources, env, runtime class, placement), or why none is. A run with
 * its own env or egress never matches: its variables (the egress credential among them)
 * are in the pod spec, which a pool pod cannot take on.
 */
export function warmPoolFor(run: ParsedCodingRun, config: OperatorConfig, pools: readonly WarmPoolConfig[]): PoolMatch {
  const here = pools.filter((pool) => pool.namespace === run.metadata.namespace && pool.size > 0);
  if (here.length === 0) return { pool: undefined, why: `no warm pool in namespace ${run.metadata.namespace}` };
  const own = fixedSpec(buildSandboxPod(run, config));
  for (const pool of here) {
    if (isDeepStrictEqual(own, fixedSpec(buildSandboxPod(asPoolRun(run, pool), config)))) return { pool };
  }
  return { pool: undefined, why: 'the run sets spec.sandbox fields (image, resources, env, egress, runtimeClassName) no pool has' };
}

/**
 * The run a pool pod is built from: only its spec.sandbox (the defaults) shapes the pod, and
 * the pod keeps nothing of it but what every default run's pod has.
 */
export function poolTemplateRun(): ParsedCodingRun {
  const spec = codingRunSpec.parse({
    task: 'warm pool template',
    repository: { url: 'https://example.invalid/warm.git' },
    model: { provider: 'scripted', scriptRef: { name: 'warm' } },
  });
  return { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingRun', metadata: { name: 'warm', namespace: 'warm', uid: 'warm' }, spec };
}

/** Per config, per pool: the shape of the pod the pool makes (one build per pool, not one per pod and pass). */
const poolShapes = new WeakMap<OperatorConfig, Map<string, SandboxPodShape>>();

function poolPodShape(pool: WarmPoolConfig, config: OperatorConfig): SandboxPodShape {
  const shapes = poolShapes.get(config) ?? new Map<string, SandboxPodShape>();
  poolShapes.set(config, shapes);
  const key = JSON.stringify([pool.namespace, pool.name, pool.image ?? null, pool.runtimeClassName ?? null]);
  let shape = shapes.get(key);
  if (!shape) {
    shape = podShapeOf([warmPoolPod(pool, config, poolTemplateRun())]);
    shapes.set(key, shape);
  }
  return shape;
}

/**
 * What the pool pod carries, runs or was changed to that the pool's own pod does not (an image
 * patched in before its container started, a sidecar, a probe, a restart), judged as the
 * workers judge a sandbox before every exec (admitted-pod.ts podAdditions) against the pod the
 * pool builds, and what its init containers ran (init-container-runs.ts, the same rule): empty for a pod a run may
 * take. Not by metadata.generation: removing a scheduling gate (Kueue), an in-place resize or an
 * added toleration bumps it on 1.33+ and changes nothing that runs, and a pool judged by it
 * replaced every pod it made, at every pass. A digest on a built image is taken as added at
 * admission only while generation is 1 (or unset): on a pod whose spec changed since, it may
 * have been patched in, and the pod is replaced.
 */
export function poolPodChanges(pod: V1Pod, pool: WarmPoolConfig, config: OperatorConfig): PodAddition[] {
  const shape = poolPodShape(pool, config);
  // The pod's own name: its spec's only change of the operator's own is a claim, which it has not had.
  return podAdditions(pod, pod.metadata?.name === undefined ? shape : { ...shape, podName: pod.metadata.name });
}

/**
 * What a claim (claimPatch) left on `pod`, read from the pod: the run it was claimed for (its
 * controller, named by the run-uid label too) and the configured pool, of the pod's namespace,
 * it names as the one it came from. Undefined for a pod that does not carry a whole claim: an
 * unclaimed pool pod, one whose pool label was put back, one stripped of its owner, one that
 * names no configured pool. Labels and owners are anyone's who may create or patch pods in the
 * namespace, so this says what the pod claims, not that a claim made it: run-reconciler.ts also
 * checks the claim's seal (warm-pool-claim-seal.ts), or asks the pool loop whether it made the
 * pod for that pool (WarmPoolLoop.madeIt).
 */
export function claimOf(pod: V1Pod, pools: readonly WarmPoolConfig[]): { runUid: string; pool: WarmPoolConfig } | undefined {
  const labels = pod.metadata?.labels ?? {};
  const runUid = controllingRunUid(pod);
  if (runUid === undefined || labels[RUN_UID_LABEL] !== runUid || labels[WARM_POOL_LABEL] !== undefined) return undefined;
  if (pod.spec?.activeDeadlineSeconds == null) return undefined;
  const pool = pools.find((each) => each.namespace === pod.metadata?.namespace && each.name === labels[CLAIMED_FROM_LABEL]);
  return pool ? { runUid, pool } : undefined;
}

/** The pool pod as the claimer judged it, and the seal of the claim (warm-pool-claim-seal.ts). */
export interface ClaimedAs {
  /**
   * metadata.resourceVersion of the pod judged claimable (poolPodChanges): tested, so a pod
   * changed between the judgement and the claim (an image patched in) fails the claim's test and
   * the run tries the next pod. Unset: not tested.
   */
  resourceVersion?: string;
  /** The seal to write (CLAIM_SEAL_ANNOTATION); unset: none. */
  seal?: string;
  /** Whether the pod judged had annotations: JSON Patch adds a member only to an existing map. */
  annotated?: boolean;
}

/**
 * The JSON Patch that claims pool pod `podName` for `run`, applied by the API server as one
 * update: it tests that the pod still carries the pool's label and removes it, so of two
 * claims of one pod the second fails its test (422) and claims nothing. It tests that the pod
 * carries no claim mark (claimMarks), so a pod claimed before and given the pool's label
 * again fails too, even when the cache that chose it was behind; that it is the pod judged (its
 * uid and, given, its resourceVersion), and that it is not being deleted. It gives the pod the
 * run's labels (its NetworkPolicy selects them), the run as controller owner (deleting the
 * run deletes the pod), the run's deadline, and the claim's seal, by which any replica knows the
 * operator claimed it (run-reconciler.ts claimedPod). It leaves POOL_ISOLATION_LABEL: the pool's
 * deny-all keeps selecting the pod. The run's own policy must exist before this patch is
 * sent (run-reconciler.ts claimWarmPod checks it).
 */
export function claimPatch(
  run: ParsedCodingRun,
  pool: WarmPoolConfig,
  activeDeadlineSeconds: number,
  podUid: string,
  as: ClaimedAs = {},
): object[] {
  const label = labelPointer(WARM_POOL_LABEL);
  const seal =
    as.seal === undefined
      ? []
      : as.annotated
        ? [{ op: 'add', path: `/metadata/annotations/${jsonPointerSegment(CLAIM_SEAL_ANNOTATION)}`, value: as.seal }]
        : [{ op: 'add', path: '/metadata/annotations', value: { [CLAIM_SEAL_ANNOTATION]: as.seal } }];
  return [
    // The pod the pool loop made, not one made since under its name.
    { op: 'test', path: '/metadata/uid', value: podUid },
    // The pod as judged: any write since (the claim's own included) changes it.
    ...(as.resourceVersion === undefined ? [] : [{ op: 'test', path: '/metadata/resourceVersion', value: as.resourceVersion }]),
    { op: 'test', path: label, value: pool.name },
    // RFC 6902 has no test for absence; the API server's JSON Patch (evanphx/json-patch) takes
    // a missing member as equal to null, and a present one as unequal. A server that did not
    // would fail every claim: the run takes a fresh pod, never another run's.
    { op: 'test', path: '/metadata/deletionTimestamp', value: null },
    ...CLAIM_MARKS.map((mark) => ({ op: 'test', path: mark.pointer, value: null })),
    { op: 'remove', path: label },
    ...Object.entries(runLabels(run)).map(([key, value]) => ({
      op: 'add',
      path: labelPointer(key),
      value,
    })),
    { op: 'add', path: labelPointer(CLAIMED_FROM_LABEL), value: pool.name },
    { op: 'add', path: '/metadata/ownerReferences', value: [ownerReference(run)] },
    { op: 'add', path: '/spec/activeDeadlineSeconds', value: activeDeadlineSeconds },
    ...seal,
  ];
}
