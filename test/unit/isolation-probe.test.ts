// Security #11.8: the isolation probe's logic, with its two I/O ports (the API calls and the
// connection attempt from the probe pod) replaced by an in-memory cluster whose network either
// enforces NetworkPolicy or not. The real connection on the dev cluster is in
// test/e2e/isolation.test.ts; a real enforcing CNI comes with the real-node tier (issue #19).
import type { V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import {
  IsolationProbe,
  defaultIsolationProbeTarget,
  type IsolationProbeConnector,
  type IsolationProbeKube,
} from '../../operator/src/controller/isolation-probe.ts';
import { decide } from '../../operator/src/reconcile/decide.ts';
import {
  ISOLATION_PROBE_LABEL,
  buildIsolationProbePod,
  buildIsolationProbePolicy,
} from '../../operator/src/reconcile/isolation-probe-pod.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const config = loadOperatorConfig(
  { sandboxImage: 'chamvi/sandbox:1', isolationProbe: { settleSeconds: 5, timeoutSeconds: 60, maxAgeSeconds: 600 } },
  {},
);
const TARGET = '10.0.0.5:8080';

/**
 * An API server of pods and policies, kept in maps; pods turn Ready after `readyAfterLooks` reads.
 * `tamper` stands for someone else in the namespace: once the probe has made its policy, it
 * gives the probe pod's name to the pod it returns (none: the pod is gone).
 */
class MemoryCluster implements IsolationProbeKube {
  readonly pods = new Map<string, V1Pod>();
  readonly policies = new Map<string, V1NetworkPolicy>();
  readonly created: string[] = [];
  readonly deleted: string[] = [];
  tamper: ((pod: V1Pod) => V1Pod | undefined) | undefined;
  private looks = 0;
  constructor(private readonly readyAfterLooks = 2) {}
  async createPod(pod: V1Pod) {
    const name = pod.metadata!.name!;
    const created: V1Pod = {
      ...pod,
      metadata: { ...pod.metadata, uid: `uid-${name}`, generation: 1 },
      status: {
        containerStatuses: [
          {
            name: 'sandbox',
            image: pod.spec!.containers[0]!.image!,
            imageID: '',
            ready: true,
            restartCount: 0,
            containerID: `cri://${name}-1`,
          },
        ],
      },
    };
    this.pods.set(`${pod.metadata!.namespace}/${name}`, created);
    this.created.push(`pod/${name}`);
    return created;
  }
  async readPod(namespace: string, name: string) {
    const pod = this.pods.get(`${namespace}/${name}`);
    if (!pod) return undefined;
    const ready = ++this.looks >= this.readyAfterLooks;
    return { ...pod, status: { ...pod.status, phase: 'Running', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] } };
  }
  async deletePod(namespace: string, name: string) {
    this.pods.delete(`${namespace}/${name}`);
    this.deleted.push(`pod/${name}`);
  }
  async createNetworkPolicy(policy: V1NetworkPolicy) {
    const key = `${policy.metadata!.namespace}/${policy.metadata!.name}`;
    this.policies.set(key, policy);
    this.created.push(`networkpolicy/${policy.metadata!.name}`);
    // The probe's policy and pod share a name.
    const pod = this.pods.get(key);
    if (this.tamper && pod) {
      const replacement = this.tamper(pod);
      if (replacement) this.pods.set(key, replacement);
      else this.pods.delete(key);
    }
  }
  async deleteNetworkPolicy(namespace: string, name: string) {
    this.policies.delete(`${namespace}/${name}`);
    this.deleted.push(`networkpolicy/${name}`);
  }
  async listLeftovers(namespace: string) {
    const inNamespace = (key: string) => key.startsWith(`${namespace}/`);
    return {
      pods: [...this.pods.keys()].filter(inNamespace).map((key) => key.split('/')[1]!),
      policies: [...this.policies.keys()].filter(inNamespace).map((key) => key.split('/')[1]!),
    };
  }
  /** Whether a deny-all egress policy selects the pod. */
  denied(namespace: string, podName: string): boolean {
    const labels = this.pods.get(`${namespace}/${podName}`)?.metadata?.labels ?? {};
    return [...this.policies.values()].some(
      (policy) =>
        policy.metadata!.namespace === namespace &&
        policy.spec!.policyTypes!.includes('Egress') &&
        (policy.spec!.egress ?? []).length === 0 &&
        Object.entries(policy.spec!.podSelector!.matchLabels ?? {}).every(([key, value]) => labels[key] === value),
    );
  }
}

/** The network between the probe pod and the target. */
function network(
  cluster: MemoryCluster,
  clock: { t: number },
  behaviour: { enforces: boolean; targetUp?: boolean; execFailures?: number },
) {
  let execFailures = behaviour.execFailures ?? 0;
  const attempts: Array<{ policy: boolean; connected: boolean }> = [];
  const connector: IsolationProbeConnector = {
    async connect(namespace, podName, target) {
      expect(target).toBe(TARGET);
      if (execFailures-- > 0) throw new Error('exec: pod has no Exec registered yet');
      const policy = cluster.denied(namespace, podName);
      const connected = (behaviour.targetUp ?? true) && !(policy && behaviour.enforces);
      // A dropped SYN costs the attempt's whole timeout.
      if (!connected) clock.t += 3_000;
      attempts.push({ policy, connected });
      return connected;
    },
  };
  return { connector, attempts };
}

function setup(behaviour: { enforces: boolean; targetUp?: boolean; execFailures?: number }, readyAfterLooks = 2) {
  const clock = { t: Date.parse('2026-11-29T12:00:00Z') };
  const cluster = new MemoryCluster(readyAfterLooks);
  const { connector, attempts } = network(cluster, clock, behaviour);
  const woken: string[] = [];
  const logged: Array<{ fields: object; message: string }> = [];
  const logger = {
    info: (fields: object, message: string) => logged.push({ fields, message }),
    warn: (fields: object, message: string) => logged.push({ fields, message }),
  };
  let ids = 0;
  const probe = new IsolationProbe({
    kube: cluster,
    connector,
    config,
    target: () => TARGET,
    logger,
    onVerdict: (namespace) => woken.push(namespace),
    now: () => new Date(clock.t),
    sleep: async (ms) => {
      clock.t += ms;
    },
    newProbeId: () => `p${++ids}`,
  });
  return { clock, cluster, probe, attempts, woken, logged };
}

function codingRun(): CodingRun {
  return codingRunFixture({
    status: {
      phase: 'Pending',
      reason: 'IsolationNotEnforced',
      conditions: [{ type: 'Accepted', status: 'True', reason: 'Valid', message: 'ok', lastTransitionTime: '2026-11-29T11:59:00Z' }],
    },
  });
}

const decideWith = (isolation: ReturnType<IsolationProbe['observe']>, now: Date) =>
  decide(
    { run: codingRun(), networkPolicyExists: false, ownedConfigMaps: [], admission: { admit: true, sequence: 1 }, isolation },
    loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'] }, {}),
    now,
  );

describe('security #11.8 isolation probe', () => {
  it('finds NetworkPolicy enforced where the deny policy stops the connection the control made, and that lets runs through', async () => {
    const { probe, attempts, woken, clock } = setup({ enforces: true });
    expect(probe.observe('agents')).toMatchObject({ verdict: 'unknown' });
    await probe.settled('agents');
    const verdict = probe.observe('agents');
    expect(verdict).toEqual({ verdict: 'enforced' });
    // The control connected with no policy; under the policy two attempts in a row failed.
    expect(attempts).toEqual([
      { policy: false, connected: true },
      { policy: true, connected: false },
      { policy: true, connected: false },
    ]);
    expect(woken).toEqual(['agents']);
    expect(decideWith(verdict, new Date(clock.t)).status).toMatchObject({ phase: 'Provisioning' });
  });

  it('finds NetworkPolicy not enforced where the probe pod still connects under the deny policy, and that fails runs', async () => {
    const { probe, attempts, clock } = setup({ enforces: false });
    probe.observe('agents');
    await probe.settled('agents');
    const verdict = probe.observe('agents');
    expect(verdict).toEqual({
      verdict: 'unenforced',
      detail: `a probe pod under a deny-all NetworkPolicy still reached ${TARGET} after 5s`,
    });
    expect(attempts.filter((attempt) => attempt.policy).length).toBeGreaterThanOrEqual(5);
    expect(attempts.every((attempt) => attempt.connected)).toBe(true);
    const decision = decideWith(verdict, new Date(clock.t));
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'IsolationNotEnforced' });
    expect(decision.actions.map((action) => action.type)).not.toContain('createPod');
  });

  it('cannot tell when the target is unreachable even without a policy: unknown (runs wait), never enforced', async () => {
    const { probe, cluster } = setup({ enforces: true, targetUp: false });
    probe.observe('agents');
    await probe.settled('agents');
    expect(probe.observe('agents')).toEqual({
      verdict: 'unknown',
      detail: expect.stringContaining(`could not reach ${TARGET} from namespace agents even without a policy`),
    });
    expect(cluster.created.filter((name) => name.startsWith('networkpolicy/'))).toEqual([]);
  });

  it('deletes its pod and policy whatever the verdict, and the leftovers of an earlier probe first', async () => {
    for (const enforces of [true, false]) {
      const { probe, cluster } = setup({ enforces });
      await cluster.createPod(buildIsolationProbePod('agents', 'old', config, 60));
      await cluster.createNetworkPolicy(buildIsolationProbePolicy('agents', 'old', 'uid-old'));
      probe.observe('agents');
      await probe.settled('agents');
      expect(cluster.pods.size).toBe(0);
      expect(cluster.policies.size).toBe(0);
      expect(cluster.deleted).toEqual(
        expect.arrayContaining([
          'pod/chamvi-isolation-probe-old',
          'networkpolicy/chamvi-isolation-probe-p1',
          'pod/chamvi-isolation-probe-p1',
        ]),
      );
    }
  });

  it("makes no create or delete once stopped during its leftover sweep: those may be the new leader's probe objects", async () => {
    const { probe, cluster } = setup({ enforces: true });
    // The new leader's probe, under way in the same namespace.
    await cluster.createPod(buildIsolationProbePod('agents', 'leader', config, 60));
    await cluster.createNetworkPolicy(buildIsolationProbePolicy('agents', 'leader', 'uid-leader'));
    const created = cluster.created.length;
    let listed!: () => void;
    const list = cluster.listLeftovers.bind(cluster);
    cluster.listLeftovers = async (namespace: string) => {
      await new Promise<void>((resolve) => (listed = resolve));
      return list(namespace);
    };
    probe.observe('agents');
    await Promise.resolve();
    const stopped = probe.stop();
    listed();
    await stopped;
    expect(cluster.deleted).toEqual([]);
    expect(cluster.created.length).toBe(created);
    expect(cluster.pods.has('agents/chamvi-isolation-probe-leader')).toBe(true);
  });

  it('tries again when the exec into the probe pod is not there yet (kwok registers it a moment after the pod)', async () => {
    const { probe } = setup({ enforces: true, execFailures: 3 });
    probe.observe('agents');
    await probe.settled('agents');
    expect(probe.observe('agents')).toEqual({ verdict: 'enforced' });
  });

  it('gives up undecided at timeoutSeconds when the pod never becomes ready, cleans up, and tries again later', async () => {
    const { probe, cluster, clock } = setup({ enforces: true }, Number.POSITIVE_INFINITY);
    probe.observe('agents');
    await probe.settled('agents');
    expect(probe.observe('agents')).toEqual({
      verdict: 'unknown',
      detail: expect.stringContaining('was not ready within isolationProbe.timeoutSeconds (60s)'),
    });
    expect(cluster.pods.size).toBe(0);
    const probesSoFar = cluster.created.length;
    probe.observe('agents');
    expect(cluster.created.length).toBe(probesSoFar);
    clock.t += 30_000;
    probe.observe('agents');
    await probe.settled('agents');
    expect(cluster.created.length).toBeGreaterThan(probesSoFar);
  });

  it('keeps a verdict for maxAgeSeconds, refreshes it in the background after half, and is unknown once it is older', async () => {
    const { probe, cluster, clock } = setup({ enforces: true });
    probe.observe('agents');
    await probe.settled('agents');
    const podsCreated = () => cluster.created.filter((name) => name.startsWith('pod/')).length;
    expect(podsCreated()).toBe(1);
    clock.t += 200_000;
    expect(probe.observe('agents')).toEqual({ verdict: 'enforced' });
    expect(podsCreated()).toBe(1);
    clock.t += 200_000; // 400 s: past half of 600
    expect(probe.observe('agents')).toEqual({ verdict: 'enforced' });
    await probe.settled('agents');
    expect(podsCreated()).toBe(2);
    clock.t += 700_000;
    expect(probe.observe('agents').verdict).toBe('unknown');
  });

  it('forgets the namespaces no run asked about for maxAgeSeconds, keeps the verdict of one asked steadily, and wakes a forgotten one again', async () => {
    const { probe, cluster, clock, woken } = setup({ enforces: true });
    const probed: string[] = [];
    const createPod = cluster.createPod.bind(cluster);
    cluster.createPod = async (pod) => (probed.push(pod.metadata!.namespace!), createPod(pod));
    const namespaces = Array.from({ length: 20 }, (_, index) => `pr-${index}`);
    // One after another: the probes here share one clock and one network.
    for (const namespace of [...namespaces, 'busy']) {
      probe.observe(namespace);
      await probe.settled(namespace);
      expect(probe.observe(namespace)).toEqual({ verdict: 'enforced' });
    }
    expect(probe.namespacesKept).toBe(21);
    // The pull requests' namespaces are done with; runs keep coming in 'busy' every minute for 20 minutes.
    for (let minute = 0; minute < 20; minute++) {
      clock.t += 60_000;
      expect(probe.observe('busy'), `minute ${minute}`).toEqual({ verdict: 'enforced' });
      await probe.settled('busy');
    }
    expect(probe.namespacesKept).toBe(1);
    // Only its verdict was refreshed, in the background at half of maxAgeSeconds: the sweep costs no probe.
    const later = probed.slice(21);
    expect(later.length).toBeGreaterThan(0);
    expect(later.length).toBeLessThanOrEqual((20 * 60) / 300);
    expect(new Set(later)).toEqual(new Set(['busy']));
    // A forgotten namespace asked again is probed again, and its runs are woken by the verdict.
    expect(probe.observe('pr-3').verdict).toBe('unknown');
    await probe.settled('pr-3');
    expect(probe.observe('pr-3')).toEqual({ verdict: 'enforced' });
    expect(woken.filter((namespace) => namespace === 'pr-3')).toHaveLength(2);
  });

  it('probes each namespace on its own', async () => {
    const { probe, cluster } = setup({ enforces: true });
    probe.observe('agents');
    probe.observe('other');
    await Promise.all([probe.settled('agents'), probe.settled('other')]);
    expect(probe.observe('other')).toEqual({ verdict: 'enforced' });
    expect(cluster.created.filter((name) => name.startsWith('pod/'))).toHaveLength(2);
  });

  // The attack: a namespace user with delete+create (or patch) on pods sees the probe's policy
  // appear and puts a pod of their own, or an image of their own, under the probe pod's name;
  // its toolbox answers "blocked" (the connector here does, under the deny policy), which
  // would start other authors' runs unisolated in a namespace that enforces nothing.
  const tamperings: Array<[string, (pod: V1Pod) => V1Pod | undefined, string]> = [
    [
      'replaced by another pod of the same name (force-delete, then create)',
      (pod) => ({ ...pod, metadata: { ...pod.metadata, uid: 'uid-forged' } }),
      'another pod (uid uid-forged) has its name; the probe created uid uid-chamvi-isolation-probe-p1',
    ],
    ['deleted', () => undefined, 'it is gone'],
    [
      'being deleted',
      (pod) => ({ ...pod, metadata: { ...pod.metadata, deletionTimestamp: new Date('2026-11-29T12:00:10Z') } }),
      'it is being deleted',
    ],
    [
      'patched to another image, where the API server counts spec changes',
      (pod) => ({
        ...pod,
        metadata: { ...pod.metadata, generation: 2 },
        spec: { ...pod.spec!, containers: [{ ...pod.spec!.containers[0]!, image: 'evil/answers-blocked:1' }] },
      }),
      'container sandbox runs image evil/answers-blocked:1, not chamvi/sandbox:1',
    ],
    [
      'patched to another image, where the API server keeps no generation for pods',
      (pod) => ({ ...pod, spec: { ...pod.spec!, containers: [{ ...pod.spec!.containers[0]!, image: 'evil/answers-blocked:1' }] } }),
      'container sandbox runs image evil/answers-blocked:1, not chamvi/sandbox:1',
    ],
    [
      'given an ephemeral container',
      (pod) => ({ ...pod, spec: { ...pod.spec!, ephemeralContainers: [{ name: 'debugger', image: 'evil/debug:1' }] } }),
      'it now carries ephemeral container debugger (evil/debug:1)',
    ],
    [
      'patched to another image and back, its container started again',
      (pod) => ({
        ...pod,
        status: { containerStatuses: pod.status!.containerStatuses!.map((status) => ({ ...status, containerID: 'cri://another' })) },
      }),
      'container sandbox was started again since the probe began',
    ],
  ];

  it.each(tamperings)(
    'believes no "blocked" from a probe pod %s after its policy is made: the verdict is unknown, never enforced',
    async (_what, tamper, why) => {
      const { probe, cluster, logged, clock } = setup({ enforces: true });
      cluster.tamper = tamper;
      probe.observe('agents');
      await probe.settled('agents');
      const verdict = probe.observe('agents');
      expect(verdict).toEqual({
        verdict: 'unknown',
        detail: expect.stringContaining(`probe pod agents/chamvi-isolation-probe-p1 is not the pod the probe created (${why})`),
      });
      expect(logged).toContainEqual({
        fields: expect.objectContaining({ namespace: 'agents', name: 'chamvi-isolation-probe-p1' }),
        message: 'isolation probe pod replaced or changed',
      });
      // Runs wait, and are told why.
      expect(decideWith(verdict, new Date(clock.t)).status).toMatchObject({
        phase: 'Pending',
        reason: 'IsolationNotEnforced',
        message: expect.stringContaining('is not the pod the probe created'),
      });
      expect(cluster.policies.size).toBe(0);
    },
  );

  it('runs no connection attempt in a pod put under its name before it was ready', async () => {
    const { probe, cluster, attempts } = setup({ enforces: true }, 3);
    const created = cluster.createPod.bind(cluster);
    cluster.createPod = async (pod) => {
      const answer = await created(pod);
      cluster.pods.set(`agents/${pod.metadata!.name}`, { ...answer, metadata: { ...answer.metadata, uid: 'uid-forged' } });
      return answer;
    };
    probe.observe('agents');
    await probe.settled('agents');
    expect(probe.observe('agents')).toEqual({ verdict: 'unknown', detail: expect.stringContaining('another pod (uid uid-forged)') });
    expect(attempts).toEqual([]);
  });

  // [when, whether the policy is there yet, which read from then fails, the attempts under the policy]
  it.each([
    ['while it waits for the pod to be ready', 0, 1, 2],
    ['before a connection attempt under the policy', 1, 1, 2],
    ['after a connection attempt under the policy (its answer is not used)', 1, 2, 3],
  ])('reads its pod again when a read fails (a 5xx, a 429, a timeout) %s: still enforced', async (_when, policies, failing, tries) => {
    const { probe, cluster, attempts } = setup({ enforces: true });
    const read = cluster.readPod.bind(cluster);
    let reads = 0;
    cluster.readPod = async (namespace, name) => {
      if (cluster.policies.size === policies && ++reads === failing) {
        throw new Error('the server is currently unable to handle the request (get pods)');
      }
      return read(namespace, name);
    };
    probe.observe('agents');
    await probe.settled('agents');
    expect(reads).toBeGreaterThanOrEqual(failing);
    expect(probe.observe('agents')).toEqual({ verdict: 'enforced' });
    expect(attempts.filter((attempt) => attempt.policy)).toHaveLength(tries);
  });

  it("defaults its target to this pod's IP on the HTTP port, bracketing IPv6, and 127.0.0.1 outside a pod", () => {
    expect(defaultIsolationProbeTarget('10.1.2.3', 8080)).toBe('10.1.2.3:8080');
    expect(defaultIsolationProbeTarget('fd00::5', 8080)).toBe('[fd00::5]:8080');
    expect(defaultIsolationProbeTarget(undefined, 41234)).toBe('127.0.0.1:41234');
  });
});

describe('security #11.8 isolation probe pod', () => {
  it('is a sandbox to the network: the sandbox image, restricted, no token, no placement of its own', () => {
    const pod = buildIsolationProbePod('agents', 'abc', config, 240);
    const spec = pod.spec!;
    expect(spec.containers[0]!.image).toBe('chamvi/sandbox:1');
    expect(spec.containers[0]!.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
      readOnlyRootFilesystem: true,
    });
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(spec.activeDeadlineSeconds).toBe(240);
    expect(spec.nodeSelector).toBeUndefined();
    expect(pod.metadata!.labels).toMatchObject({ [ISOLATION_PROBE_LABEL]: 'abc', 'app.kubernetes.io/managed-by': 'chamvi-operator' });
  });

  it('is denied all egress and ingress by a policy that selects exactly it and is owned by it', () => {
    const policy = buildIsolationProbePolicy('agents', 'abc', 'pod-uid');
    expect(policy.spec).toEqual({
      podSelector: { matchLabels: { [ISOLATION_PROBE_LABEL]: 'abc' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    });
    expect(policy.metadata!.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Pod', name: 'chamvi-isolation-probe-abc', uid: 'pod-uid' },
    ]);
  });
});
