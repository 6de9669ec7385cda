// Warm pools as pure decisions: sizing (refill, replace, shrink), the order of claims, which
// runs a pool may serve (only those whose fresh pod would be the same pod), and the claim
// patch that lets one claimer win.
import type { V1ContainerStatus, V1Pod, V1PodStatus } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { RUN_UID_LABEL, codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { sandboxDenyAllPolicy } from '../../operator/src/reconcile/sandbox-network-policy.ts';
import { selectorMatches } from '../support/label-selector.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { claimOrder, failedStartBackoffMs, planWarmPool, type PoolPodView } from '../../operator/src/reconcile/warm-pool-plan.ts';
import {
  POOL_ISOLATION_LABEL,
  WARM_POOL_LABEL,
  claimMarks,
  claimOf,
  claimPatch,
  isWarmPoolNetworkPolicy,
  poolPodChanges,
  warmPoolFor,
  warmPoolNetworkPolicy,
  warmPoolPod,
  type WarmPoolConfig,
} from '../../operator/src/reconcile/warm-pool.ts';
import { JsonPatchTestFailed, applyAsApiServer } from '../support/api-server-json-patch.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const pod = (name: string, overrides: Partial<PoolPodView> = {}): PoolPodView => ({
  name,
  phase: 'Running',
  ready: true,
  deleting: false,
  createdAt: `2026-11-30T12:00:0${name.slice(-1)}Z`,
  ...overrides,
});

describe('planWarmPool', () => {
  const cases: Array<{ name: string; size: number; pods: PoolPodView[]; create: number; delete: string[]; failedStarts?: number }> = [
    { name: 'an empty pool fills to its size', size: 3, pods: [], create: 3, delete: [] },
    { name: 'a full pool does nothing', size: 2, pods: [pod('p1'), pod('p2')], create: 0, delete: [] },
    {
      name: 'starting pods count: no double fill',
      size: 2,
      pods: [pod('p1', { phase: 'Pending', ready: false }), pod('p2')],
      create: 0,
      delete: [],
    },
    { name: 'refills after a claim took a pod (it left the pool)', size: 3, pods: [pod('p1'), pod('p2')], create: 1, delete: [] },
    { name: 'pods being deleted do not count', size: 2, pods: [pod('p1'), pod('p2', { deleting: true })], create: 1, delete: [] },
    {
      name: 'an ended pod is deleted and replaced',
      size: 2,
      pods: [pod('p1'), pod('p2', { phase: 'Failed', ready: false })],
      create: 1,
      delete: ['p2'],
      failedStarts: 1,
    },
    {
      name: 'sized down: not-ready pods go first, then the newest ready',
      size: 1,
      pods: [pod('p1'), pod('p2'), pod('p3', { phase: 'Pending', ready: false }), pod('p4')],
      create: 0,
      delete: ['p3', 'p4', 'p2'],
    },
    { name: 'sized to 0: every pod goes', size: 0, pods: [pod('p1'), pod('p2')], create: 0, delete: ['p2', 'p1'] },
  ];
  for (const row of cases) {
    it(row.name, () =>
      expect(planWarmPool(row.size, row.pods)).toEqual({ create: row.create, delete: row.delete, failedStarts: row.failedStarts ?? 0 }),
    );
  }

  it('replaces a pod not ready within the timeout of its creation (ImagePullBackOff), as a failed start', () => {
    const clock = { now: Date.parse('2026-11-30T12:20:00Z'), readyTimeoutMs: 900_000 };
    const pulling = pod('p1', { phase: 'Pending', ready: false, createdAt: '2026-11-30T12:00:01Z' });
    const starting = pod('p2', { phase: 'Pending', ready: false, createdAt: '2026-11-30T12:19:00Z' });
    expect(planWarmPool(2, [pulling, starting], 20, clock)).toEqual({ create: 1, delete: ['p1'], failedStarts: 1 });
    // A ready pod is never stuck, however old; without a clock nothing is.
    expect(planWarmPool(1, [pod('p3', { createdAt: '2026-11-30T12:00:03Z' })], 20, clock)).toEqual({
      create: 0,
      delete: [],
      failedStarts: 0,
    });
    expect(planWarmPool(2, [pulling, starting])).toEqual({ create: 0, delete: [], failedStarts: 0 });
  });

  it('backs off after failed starts: 2 s, doubling, at most 5 min', () => {
    expect([0, 1, 2, 3, 8, 9, 50].map(failedStartBackoffMs)).toEqual([0, 2_000, 4_000, 8_000, 256_000, 300_000, 300_000]);
  });

  it('creates at most maxCreates pods in one pass', () => {
    expect(planWarmPool(500, [], 20).create).toBe(20);
  });
});

describe('claimOrder', () => {
  it('offers only ready, running, not-deleting pods, oldest first', () => {
    const pods = [
      pod('p3'),
      pod('p1', { ready: false, phase: 'Pending' }),
      pod('p2', { deleting: true }),
      pod('p4', { createdAt: '2026-11-30T11:00:00Z' }),
      pod('p5'),
    ];
    expect(claimOrder(pods)).toEqual(['p4', 'p3', 'p5']);
  });
});

const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], sandboxImage: 'sandbox:1' }, {});
const pools: WarmPoolConfig[] = [
  { name: 'default', namespace: 'agents', size: 2 },
  { name: 'gvisor', namespace: 'agents', size: 1, runtimeClassName: 'gvisor' },
  { name: 'other', namespace: 'elsewhere', size: 2 },
];

function parsed(spec: Record<string, unknown> = {}, namespace = 'agents'): ParsedCodingRun {
  const run = codingRunFixture({ spec, metadata: { namespace } });
  return { ...run, spec: codingRunSpec.parse(run.spec) };
}

describe('warmPoolFor', () => {
  const cases: Array<{ name: string; spec?: Record<string, unknown>; namespace?: string; pool?: string; why?: RegExp }> = [
    { name: 'a run with the default sandbox takes the default pool', pool: 'default' },
    { name: 'a budget only changes the deadline, which the claim sets', spec: { budget: { timeout: '5m', maxSteps: 3 } }, pool: 'default' },
    { name: 'its runtime class picks the pool with that class', spec: { sandbox: { runtimeClassName: 'gvisor' } }, pool: 'gvisor' },
    { name: 'a runtime class no pool has: none', spec: { sandbox: { runtimeClassName: 'kata' } }, why: /no pool has/ },
    { name: 'its own env is in the pod spec: none', spec: { sandbox: { env: [{ name: 'CI', value: '1' }] } }, why: /no pool has/ },
    { name: 'its own resources: none', spec: { sandbox: { resources: { limits: { memory: '8Gi' } } } }, why: /no pool has/ },
    { name: 'its own image: none', spec: { sandbox: { image: 'registry.example/team/node:22' } }, why: /no pool has/ },
    { name: 'a namespace with no pool: none (pods cannot change namespace)', namespace: 'team-b', why: /no warm pool in namespace team-b/ },
  ];
  for (const row of cases) {
    it(row.name, () => {
      const match = warmPoolFor(parsed(row.spec, row.namespace), config, pools);
      if (row.pool) expect(match.pool?.name).toBe(row.pool);
      else expect(match.pool === undefined && row.why!.test(match.why)).toBe(true);
    });
  }

  it('a pool sized 0 serves nobody', () => {
    expect(warmPoolFor(parsed(), config, [{ name: 'default', namespace: 'agents', size: 0 }]).pool).toBeUndefined();
  });
});

describe('warmPoolPod and claimPatch', () => {
  const run = parsed({ budget: { timeout: '5m' } });
  const fresh = buildSandboxPod(run, config);
  const warm = warmPoolPod(pools[0]!, config, parsed({}, 'anywhere'));

  it("is the run's fresh pod but for the deadline, with the pool's label and no run's, owner or data", () => {
    const { activeDeadlineSeconds, ...freshSpec } = fresh.spec!;
    expect(activeDeadlineSeconds).toBeGreaterThan(0);
    expect(warm.spec).toEqual(freshSpec);
    expect(warm.metadata).toEqual({
      generateName: 'default-warm-',
      namespace: 'agents',
      labels: {
        'app.kubernetes.io/name': 'chamvi-sandbox',
        'app.kubernetes.io/managed-by': 'chamvi-operator',
        [WARM_POOL_LABEL]: 'default',
        [POOL_ISOLATION_LABEL]: 'default',
      },
    });
    expect(JSON.stringify(warm)).not.toContain(run.metadata.uid);
  });

  it("tests the pod's uid, its resourceVersion as judged, the pool label, that it is not being deleted and that no claim marked it, removes the label first, then gives the pod the run labels, owner, deadline and seal", () => {
    const as = { resourceVersion: '4711', seal: 'the-seal', annotated: false };
    const patch = claimPatch(run, pools[0]!, 360, 'uid-pool-pod', as) as Array<{ op: string; path: string; value?: unknown }>;
    expect(patch.slice(0, 10)).toEqual([
      { op: 'test', path: '/metadata/uid', value: 'uid-pool-pod' },
      { op: 'test', path: '/metadata/resourceVersion', value: '4711' },
      { op: 'test', path: '/metadata/labels/chamvi.dev~1warm-pool', value: 'default' },
      { op: 'test', path: '/metadata/deletionTimestamp', value: null },
      { op: 'test', path: '/metadata/ownerReferences', value: null },
      { op: 'test', path: '/metadata/labels/chamvi.dev~1run-uid', value: null },
      { op: 'test', path: '/metadata/labels/chamvi.dev~1run', value: null },
      { op: 'test', path: '/metadata/labels/chamvi.dev~1claimed-from-pool', value: null },
      { op: 'test', path: '/spec/activeDeadlineSeconds', value: null },
      { op: 'remove', path: '/metadata/labels/chamvi.dev~1warm-pool' },
    ]);
    const labels = Object.fromEntries(
      patch.filter((op) => op.path.startsWith('/metadata/labels/') && op.op === 'add').map((op) => [op.path, op.value]),
    );
    for (const [key, value] of Object.entries(fresh.metadata!.labels!))
      expect(labels[`/metadata/labels/${key.replace(/\//g, '~1')}`]).toBe(value);
    expect(patch).toContainEqual({ op: 'add', path: '/metadata/ownerReferences', value: fresh.metadata!.ownerReferences });
    expect(patch).toContainEqual({ op: 'add', path: '/spec/activeDeadlineSeconds', value: 360 });
    expect(patch).toContainEqual({ op: 'add', path: '/metadata/annotations', value: { 'chamvi.dev/claim-seal': 'the-seal' } });
    // A pod with annotations keeps them: the seal is added beside them.
    const annotated = claimPatch(run, pools[0]!, 360, 'uid-pool-pod', { ...as, annotated: true });
    expect(annotated).toContainEqual({ op: 'add', path: '/metadata/annotations/chamvi.dev~1claim-seal', value: 'the-seal' });
    expect(patch.filter((op) => op.path === '/metadata/generation')).toEqual([]);
  });
});

describe('a pod a claim marked', () => {
  const pool = pools[0]!;
  /** A pool pod as the loop made it, as the API server holds it (generation 1: its spec as made). */
  const poolPod = () => {
    const made = warmPoolPod(pool, config, parsed({}, 'anywhere'));
    return { ...made, metadata: { ...made.metadata, name: 'default-warm-abcde', uid: 'uid-pool-pod', generation: 1 } };
  };
  const claimBy = (run: ParsedCodingRun) => claimPatch(run, pool, 360, 'uid-pool-pod');
  const runA = parsed({}, 'agents');
  const runB = { ...parsed({}, 'agents'), metadata: { ...runA.metadata, name: 'run-b', uid: 'uid-run-b' } };
  /** Run A's claim, then a namespace member puts the pool's label back on A's pod, and maybe takes off what else they may. */
  const relabelled = (scrub: (pod: ReturnType<typeof poolPod>) => void = () => {}) => {
    const claimed = applyAsApiServer(poolPod(), claimBy(runA));
    claimed.metadata.labels = { ...claimed.metadata.labels, [WARM_POOL_LABEL]: pool.name };
    scrub(claimed);
    return claimed;
  };

  it('is none of a pool pod as made, and every mark of one claimed', () => {
    expect(claimMarks(poolPod())).toEqual([]);
    expect(claimMarks(relabelled())).toEqual([
      '/metadata/ownerReferences',
      '/metadata/labels/chamvi.dev~1run-uid',
      '/metadata/labels/chamvi.dev~1run',
      '/metadata/labels/chamvi.dev~1claimed-from-pool',
      '/spec/activeDeadlineSeconds',
    ]);
  });

  it('a claim patch takes a pool pod as made, and no pod claimed before and given the pool label back', () => {
    expect(applyAsApiServer(poolPod(), claimBy(runB)).metadata.ownerReferences).toEqual([expect.objectContaining({ uid: 'uid-run-b' })]);
    expect(() => applyAsApiServer(relabelled(), claimBy(runB))).toThrow(JsonPatchTestFailed);
  });

  it('is still marked, and refused a claim, once owner and run labels are taken off: the deadline cannot be', () => {
    const scrubbed = relabelled((pod) => {
      delete pod.metadata.ownerReferences;
      for (const key of Object.keys(pod.metadata.labels!)) if (!(key in poolPod().metadata.labels!)) delete pod.metadata.labels![key];
    });
    expect(scrubbed.metadata.labels).toEqual(poolPod().metadata.labels);
    expect(claimMarks(scrubbed)).toEqual(['/spec/activeDeadlineSeconds']);
    expect(() => applyAsApiServer(scrubbed, claimBy(runB))).toThrow(JsonPatchTestFailed);
  });

  it('a claim patch takes no pool pod changed since it was judged (its resourceVersion), nor one being deleted', () => {
    const judged = { ...poolPod(), metadata: { ...poolPod().metadata, resourceVersion: '10' } };
    const claimJudged = (run: ParsedCodingRun) => claimPatch(run, pool, 360, 'uid-pool-pod', { resourceVersion: '10' });
    // kubectl set image after the judgement: the API server moves resourceVersion on.
    const patched = { ...judged, metadata: { ...judged.metadata, resourceVersion: '11' } };
    expect(() => applyAsApiServer(patched, claimJudged(runB))).toThrow(JsonPatchTestFailed);
    const deleting = { ...judged, metadata: { ...judged.metadata, deletionTimestamp: new Date('2026-11-30T12:00:00Z') } };
    expect(() => applyAsApiServer(deleting, claimJudged(runB))).toThrow(JsonPatchTestFailed);
    expect(applyAsApiServer(judged, claimJudged(runB)).metadata.ownerReferences).toEqual([expect.objectContaining({ uid: 'uid-run-b' })]);
  });

  it('a claim adds its seal to annotations a webhook put on the pod, keeping theirs', () => {
    const annotated = { ...poolPod(), metadata: { ...poolPod().metadata, annotations: { 'webhook.example/seen': 'yes' } } };
    const claimed = applyAsApiServer(annotated, claimPatch(runB, pool, 360, 'uid-pool-pod', { seal: 's', annotated: true }));
    expect(claimed.metadata.annotations).toEqual({ 'webhook.example/seen': 'yes', 'chamvi.dev/claim-seal': 's' });
    const bare = applyAsApiServer(poolPod(), claimPatch(runB, pool, 360, 'uid-pool-pod', { seal: 's', annotated: false }));
    expect(bare.metadata.annotations).toEqual({ 'chamvi.dev/claim-seal': 's' });
  });
});

describe('poolPodChanges: whether a pool pod is still the pod its pool builds', () => {
  const pool = pools[0]!;
  const poolPod = (generation?: number) => {
    const made = warmPoolPod(pool, config, parsed({}, 'anywhere'));
    return {
      ...made,
      metadata: { ...made.metadata, name: 'default-warm-abcde', uid: 'uid-pool-pod', ...(generation === undefined ? {} : { generation }) },
    };
  };

  it('finds nothing in a pod as made, one ungated or resized since (generation 2), or one on an API server that keeps no generation', () => {
    expect(poolPodChanges(poolPod(1), pool, config)).toEqual([]);
    const ungated = poolPod(2);
    ungated.spec = { ...ungated.spec!, schedulingGates: [], tolerations: [{ key: 'kueue', operator: 'Exists' }] };
    expect(poolPodChanges(ungated, pool, config)).toEqual([]);
    expect(poolPodChanges(poolPod(), pool, config)).toEqual([]);
  });

  it('finds an image patched in, whatever its generation', () => {
    for (const generation of [1, 2, undefined]) {
      const patched = poolPod(generation);
      patched.spec = { ...patched.spec!, containers: patched.spec!.containers.map((c) => ({ ...c, image: 'evil.example/sandbox:1' })) };
      expect(poolPodChanges(patched, pool, config)).toContainEqual(expect.objectContaining({ kind: 'image' }));
    }
  });

  describe('a custom image pool pod: its init container (chamvi-tools) judged by what the kubelet reports it ran', () => {
    const custom = { ...pool, image: 'registry.example/custom:1' };
    const digest = `sha256:${'a'.repeat(64)}`;
    /** The pod as made, its spec changed since `generation - 1` times (undefined: an API server before 1.33), with `status`. */
    const made = (generation: number | undefined, status?: V1PodStatus): V1Pod => {
      const pod = warmPoolPod(custom, config, parsed({}, 'anywhere'));
      return {
        ...pod,
        metadata: { ...pod.metadata, name: 'default-warm-fghij', uid: 'uid-custom', ...(generation === undefined ? {} : { generation }) },
        ...(status ? { status } : {}),
      };
    };
    const tools = made(1).spec!.initContainers![0]!;
    /** Ready, chamvi-tools as a kubelet reports it: ran once from `image` (its imageID the digest it resolved to), exited `exitCode`. */
    const ready = (ran: Partial<V1ContainerStatus> = {}, exitCode = 0): V1PodStatus => ({
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True' }],
      initContainerStatuses: [
        {
          name: 'chamvi-tools',
          image: tools.image!,
          imageID: `${tools.image!.split(':')[0]}@${digest}`,
          ready: true,
          restartCount: 0,
          state: { terminated: { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error' } },
          ...ran,
        },
      ],
    });
    const initChanges = (pod: V1Pod) => poolPodChanges(pod, custom, config);

    it('finds nothing in one not started yet, whatever its generation, nor in one whose init container ran the built image, ungated or resized since', () => {
      expect(tools.name).toBe('chamvi-tools');
      for (const generation of [1, 2, 3, undefined]) {
        expect(initChanges(made(generation))).toEqual([]);
        expect(initChanges(made(generation, { phase: 'Pending' }))).toEqual([]);
        expect(initChanges(made(generation, ready()))).toEqual([]);
      }
      // As runtimes report it: spelled out, or another tag of the same image on the node (kubernetes#51017), or an image ID with the digest.
      const [repository] = tools.image!.split(':');
      expect(initChanges(made(2, ready({ image: `${repository}:latest` })))).toEqual([]);
      expect(initChanges(made(2, ready({ image: digest })))).toEqual([]);
      // An image loaded onto the node (kind load): no repository digest, its imageID the image's own.
      expect(initChanges(made(2, ready({ image: `${repository}:latest`, imageID: digest })))).toEqual([]);
    });

    it('finds one whose init container ran an image patched in and back: the spec reads as built, the status names the rigged image', () => {
      // Patched while Pending (`kubectl set image pod/... chamvi-tools=...`), run, patched back after it exited:
      // the kubelet does not run an init container again, and reports the image it ran.
      // Its own registry's, or one that copies the built path and tag.
      for (const rigged of ['evil.example/rigged:1', `evil.example/${tools.image!.split('/').slice(1).join('/')}`])
        for (const generation of [3, undefined]) {
          const restored = made(generation, ready({ image: rigged, imageID: `${rigged.split(':')[0]}@${digest}` }));
          expect(restored.spec!.initContainers![0]!.image).toBe(tools.image);
          expect(initChanges(restored)).toEqual([expect.objectContaining({ kind: 'image', name: rigged, container: 'chamvi-tools' })]);
        }
    });

    it('names the images the pool builds in full in its finding (not cut to nothing)', () => {
      const [finding] = initChanges(made(1, ready({ image: 'evil.example/rigged:1', imageID: `evil.example/rigged@${digest}` })));
      expect(finding?.detail).toBe(`the kubelet ran it from this image; the operator builds ${tools.image}`);
    });

    it("takes a run from another repository's name as the built image when its imageID is the digest sandboxImage is pinned to", () => {
      // containerd names an image by the first of its references in lexical order: a tenant's copy
      // (docker.io/a/copy:1) of the same image names it for every pod of the node.
      const pinnedConfig = { ...config, sandboxImage: `${config.sandboxImage}@${digest}` };
      const pinnedPod = (status: V1PodStatus): V1Pod => {
        const pod = warmPoolPod(custom, pinnedConfig, parsed({}, 'anywhere'));
        return { ...pod, metadata: { ...pod.metadata, name: 'default-warm-fghij', uid: 'uid-custom', generation: 1 }, status };
      };
      const copy = ready({ image: 'docker.io/a/copy:1', imageID: `docker.io/a/copy@${digest}` });
      expect(poolPodChanges(pinnedPod(copy), custom, pinnedConfig)).toEqual([]);
      // Another digest under the copy's name is another image.
      const other = ready({ image: 'docker.io/a/copy:1', imageID: `docker.io/a/copy@sha256:${'b'.repeat(64)}` });
      expect(poolPodChanges(pinnedPod(other), custom, pinnedConfig)).toContainEqual(expect.objectContaining({ kind: 'image' }));
      // Unpinned, the digest is not known: the copy's name reads as another image.
      expect(initChanges(made(1, copy))).toContainEqual(expect.objectContaining({ kind: 'image', name: 'docker.io/a/copy:1' }));
    });

    it('finds one whose init container ran twice, failed, or has no record of running though the pod is past it', () => {
      expect(initChanges(made(1, ready({ restartCount: 1 })))).toContainEqual(
        expect.objectContaining({ kind: 'restart', container: 'chamvi-tools' }),
      );
      expect(initChanges(made(1, ready({}, 1)))).toContainEqual(expect.objectContaining({ kind: 'initContainer', detail: 'it exited 1' }));
      const unrecorded = made(1, { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] });
      expect(initChanges(unrecorded)).toContainEqual(expect.objectContaining({ kind: 'initContainer', name: 'chamvi-tools' }));
    });
  });

  it('takes a digest on the built image as added at admission only while the spec is unchanged', () => {
    const pinned = (generation: number) => {
      const pod = poolPod(generation);
      const digest = `@sha256:${'a'.repeat(64)}`;
      pod.spec = {
        ...pod.spec!,
        containers: pod.spec!.containers.map((c) => ({ ...c, image: `${c.image!.replace(/:[^:/]+$/, '')}${digest}` })),
      };
      return pod;
    };
    expect(poolPodChanges(pinned(1), pool, config)).toEqual([]);
    expect(poolPodChanges(pinned(2), pool, config)).not.toEqual([]);
  });
});

describe('claimOf: the claim a pod carries', () => {
  const [pool, other] = [pools[0]!, { ...pools[0]!, name: 'other' }];
  const poolPod = () => {
    const made = warmPoolPod(pool, config, parsed({}, 'anywhere'));
    return { ...made, metadata: { ...made.metadata, name: 'default-warm-abcde', uid: 'uid-pool-pod', generation: 1 } };
  };
  const run = parsed({}, 'agents');
  const claimed = () => applyAsApiServer(poolPod(), claimPatch(run, pool, 360, 'uid-pool-pod'));

  it('names the run and the configured pool a claim patch left on the pod', () => {
    expect(claimOf(claimed(), [other, pool])).toEqual({ runUid: run.metadata.uid, pool });
  });

  it('is none for an unclaimed pool pod, a claim of a pool not configured in its namespace, or a pod missing any part of a claim', () => {
    const without = (change: (pod: ReturnType<typeof claimed>) => void) => {
      const pod = claimed();
      change(pod);
      return pod;
    };
    expect(claimOf(poolPod(), [pool])).toBeUndefined();
    expect(claimOf(claimed(), [other])).toBeUndefined();
    expect(claimOf(claimed(), [{ ...pool, namespace: 'elsewhere' }])).toBeUndefined();
    expect(
      claimOf(
        without((pod) => delete pod.metadata.ownerReferences),
        [pool],
      ),
    ).toBeUndefined();
    expect(
      claimOf(
        without((pod) => (pod.metadata.labels![RUN_UID_LABEL] = 'uid-someone-else')),
        [pool],
      ),
    ).toBeUndefined();
    expect(
      claimOf(
        without((pod) => (pod.metadata.labels![WARM_POOL_LABEL] = pool.name)),
        [pool],
      ),
    ).toBeUndefined();
    expect(
      claimOf(
        without((pod) => delete pod.spec!.activeDeadlineSeconds),
        [pool],
      ),
    ).toBeUndefined();
  });
});

/** The labels a pod has after the API server applied a claim patch's label operations (test, remove, add). */
function labelsAfter(labels: Record<string, string>, patch: Array<{ op: string; path: string; value?: unknown }>): Record<string, string> {
  const result = { ...labels };
  for (const op of patch) {
    if (!op.path.startsWith('/metadata/labels/')) continue;
    const key = op.path.slice('/metadata/labels/'.length).replace(/~1/g, '/').replace(/~0/g, '~');
    // A test against null is one for absence (api-server-json-patch.ts).
    if (op.op === 'test') expect(result[key]).toBe(op.value === null ? undefined : op.value);
    if (op.op === 'remove') delete result[key];
    if (op.op === 'add') result[key] = String(op.value);
  }
  return result;
}

const selects = (matchLabels: Record<string, string> | undefined, labels: Record<string, string>) =>
  Object.entries(matchLabels ?? {}).every(([key, value]) => labels[key] === value);

describe("a pool's deny-all NetworkPolicy", () => {
  const pool = pools[0]!;
  const policy = warmPoolNetworkPolicy(pool);
  const poolPod = warmPoolPod(pool, config, parsed({}, 'anywhere'));
  const run = parsed();

  it("denies all ingress and egress, in the pool namespace, and is recognised as the pool's own", () => {
    expect(policy.metadata).toMatchObject({ name: 'default-warm-pool-deny-all', namespace: 'agents' });
    expect(policy.spec).toMatchObject({ policyTypes: ['Ingress', 'Egress'], ingress: [], egress: [] });
    expect(isWarmPoolNetworkPolicy(policy, pool)).toBe(true);
  });

  it('selects every unclaimed pod of the pool, and nothing of another pool', () => {
    expect(selects(policy.spec!.podSelector!.matchLabels, poolPod.metadata!.labels!)).toBe(true);
    const other = warmPoolPod(pools[1]!, config, parsed({}, 'anywhere'));
    expect(selects(policy.spec!.podSelector!.matchLabels, other.metadata!.labels!)).toBe(false);
  });

  it("keeps selecting a claimed pod, which the namespace's sandbox deny-all selects too: no moment selected by no policy", () => {
    const claimed = labelsAfter(
      poolPod.metadata!.labels!,
      claimPatch(run, pool, 360, 'uid-pool-pod') as Array<{ op: string; path: string }>,
    );
    expect(claimed[WARM_POOL_LABEL]).toBeUndefined();
    expect(selects(policy.spec!.podSelector!.matchLabels, claimed)).toBe(true);
    expect(selectorMatches(sandboxDenyAllPolicy(pool.namespace).spec!.podSelector, claimed)).toBe(true);
  });

  it("a policy holding its name with other rules, another selector or no label is not the pool's", () => {
    const allowing = { ...policy, spec: { ...policy.spec!, egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] }] } };
    const wider = { ...policy, spec: { ...policy.spec!, podSelector: {} } };
    const unlabelled = { ...policy, metadata: { ...policy.metadata, labels: {} } };
    const ingressOnly = { ...policy, spec: { ...policy.spec!, policyTypes: ['Ingress'] } };
    for (const foreign of [allowing, wider, unlabelled, ingressOnly, undefined]) expect(isWarmPoolNetworkPolicy(foreign, pool)).toBe(false);
  });
});
