// What the operator's own ServiceAccount may write, enforced by the real API server: the chart's
// RBAC for the operator (templates/rbac.yaml, with watchNamespaces and a warm pool) and its write
// policy (templates/operator-write-policy.yaml) applied to the local control plane. The operator
// clones hostile repositories and parses sandbox output; should it run code it was sent, it still
// makes only pods of its own shape (the namespace's default ServiceAccount, no token, emptyDir
// volumes only, nothing of the host, nothing privileged or root, its label), deletes only its own
// pods, and writes only its own ConfigMaps and NetworkPolicies (a run's, and policies that allow
// nothing but the path to the egress proxy).
// Every pod the operator's builders make goes through its own gateways with a real token of that
// ServiceAccount and is admitted; every forbidden write is first seen to pass RBAC alone.
import { CoreV1Api, KubeConfig, NetworkingV1Api, NodeV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { createKubeGateway, type KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { kubernetesWarmPoolGateway, type WarmPoolGateway } from '../../operator/src/kube/warm-pool-gateway.ts';
import { createIsolationProbeKube } from '../../operator/src/controller/isolation-probe.ts';
import { FINISHED_RUNS_CONFIG_MAP } from '../../operator/src/reconcile/finished-runs.ts';
import { buildIsolationProbePod, buildIsolationProbePolicy, isolationProbeName } from '../../operator/src/reconcile/isolation-probe-pod.ts';
import {
  SANDBOX_DENY_ALL_POLICY,
  SANDBOX_EGRESS_POLICY,
  sandboxDenyAllPolicy,
  sandboxEgressPolicy,
} from '../../operator/src/reconcile/sandbox-network-policy.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { claimPatch, warmPoolNetworkPolicy, warmPoolPod, type WarmPoolConfig } from '../../operator/src/reconcile/warm-pool.ts';
import { kubernetesRunResources } from '../../operator/src/workers/run-resources.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl, kubectlJson, kubectlOk } from '../support/cluster.ts';
import { applyManifests, deleteManifests, type RenderedManifest } from '../support/egress-proxy-release.ts';
import { refusalOf, type ApiRefusal } from '../support/admission-refusal.ts';
import { chartDir, helm } from '../support/helm.ts';
import { createPodOwnerRun } from '../support/pod-owner-run.ts';

const NS = 'operator-writes';
const RELEASE = 'op-writes';
const OPERATOR = `${RELEASE}-chamvi-operator`;
const REFUSED = 'the operator may';
const RUNTIME_CLASS = 'operator-writes-gvisor';
const pool: WarmPoolConfig = { name: 'pool', namespace: NS, size: 1 };
const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'] }, {});

type Refusal = ApiRefusal | undefined;

/** The policy and its binding (cluster-scoped, removed after the file), and the test's RuntimeClass. */
let policies: RenderedManifest[] = [];
let admin: KubeConfig;
let operatorConfig: KubeConfig;
let kube: KubeGateway;
let warmPools: WarmPoolGateway;
let core: CoreV1Api;
let networking: NetworkingV1Api;
let run: ParsedCodingRun;

let forbiddenCount = 0;

/** A run's sandbox pod as the operator builds it, under a name of its own. */
function sandboxPod(): V1Pod {
  const pod = buildSandboxPod(run, config);
  forbiddenCount += 1;
  pod.metadata!.name = `shape-${forbiddenCount}`;
  return pod;
}

/** Pods a compromised operator might make in a watched namespace, each changed from its own sandbox pod, with what the policy says. */
const forbiddenPods: { case: string; forge: (pod: V1Pod) => V1Pod; refused: string }[] = [
  {
    case: "a tenant's CI ServiceAccount",
    forge: (pod) => ({ ...pod, spec: { ...pod.spec!, serviceAccountName: 'ci' } }),
    refused: `${REFUSED} make only pods of the namespace's default ServiceAccount with automountServiceAccountToken false, not one of ServiceAccount ci`,
  },
  {
    case: 'a mounted token',
    forge: (pod) => ({ ...pod, spec: { ...pod.spec!, automountServiceAccountToken: true } }),
    refused: 'not one of ServiceAccount default with automountServiceAccountToken true',
  },
  {
    case: 'no word on the token (the default mounts one)',
    forge: (pod) => ({ ...pod, spec: { ...pod.spec!, automountServiceAccountToken: undefined } }),
    refused: 'with automountServiceAccountToken unset',
  },
  {
    case: 'a hostPath volume',
    forge: (pod) => ({
      ...pod,
      spec: { ...pod.spec!, volumes: [...pod.spec!.volumes!, { name: 'host', hostPath: { path: '/var/run' } }] },
    }),
    refused: `${REFUSED} make only pods whose volumes are all emptyDir, not host`,
  },
  {
    case: 'a projected ServiceAccount token of any audience',
    forge: (pod) => ({
      ...pod,
      spec: {
        ...pod.spec!,
        volumes: [
          ...pod.spec!.volumes!,
          { name: 'aws', projected: { sources: [{ serviceAccountToken: { path: 'token', audience: 'sts.amazonaws.com' } }] } },
        ],
      },
    }),
    refused: 'whose volumes are all emptyDir, not aws',
  },
  {
    case: "the node's network",
    forge: (pod) => ({ ...pod, spec: { ...pod.spec!, hostNetwork: true } }),
    refused: `${REFUSED} make only pods without hostNetwork, hostPID, hostIPC or a hostPort`,
  },
  {
    case: "the node's PIDs",
    forge: (pod) => ({ ...pod, spec: { ...pod.spec!, hostPID: true } }),
    refused: 'without hostNetwork, hostPID, hostIPC or a hostPort',
  },
  {
    case: "a port of the node's",
    forge: (pod) => ({
      ...pod,
      spec: { ...pod.spec!, containers: pod.spec!.containers.map((c) => ({ ...c, ports: [{ containerPort: 8080, hostPort: 8080 }] })) },
    }),
    refused: 'without hostNetwork, hostPID, hostIPC or a hostPort',
  },
  {
    case: 'a node of its choosing (past the scheduler)',
    forge: (pod) => ({ ...pod, spec: { ...pod.spec!, nodeName: 'control-plane' } }),
    refused: `${REFUSED} create only pods the scheduler places, not one on node control-plane`,
  },
  {
    case: 'a privileged container',
    forge: (pod) => ({
      ...pod,
      spec: {
        ...pod.spec!,
        containers: pod.spec!.containers.map((c) => ({
          ...c,
          securityContext: { ...c.securityContext, privileged: true, allowPrivilegeEscalation: true },
        })),
      },
    }),
    refused: `${REFUSED} make only pods whose containers are not privileged, set allowPrivilegeEscalation false, drop ALL capabilities and add none, not sandbox`,
  },
  {
    case: 'an init container that may escalate',
    forge: (pod) => ({
      ...pod,
      spec: {
        ...pod.spec!,
        initContainers: [{ name: 'setup', image: config.sandboxImage, command: ['true'], securityContext: { runAsNonRoot: true } }],
      },
    }),
    refused: 'drop ALL capabilities and add none, not setup',
  },
  {
    case: 'an added capability',
    forge: (pod) => ({
      ...pod,
      spec: {
        ...pod.spec!,
        containers: pod.spec!.containers.map((c) => ({
          ...c,
          securityContext: { ...c.securityContext, capabilities: { drop: ['ALL'], add: ['SYS_ADMIN'] } },
        })),
      },
    }),
    refused: 'drop ALL capabilities and add none, not sandbox',
  },
  {
    case: 'capabilities kept (none dropped)',
    forge: (pod) => ({
      ...pod,
      spec: {
        ...pod.spec!,
        containers: pod.spec!.containers.map((c) => ({ ...c, securityContext: { ...c.securityContext, capabilities: { drop: [] } } })),
      },
    }),
    refused: 'drop ALL capabilities and add none, not sandbox',
  },
  {
    case: 'a container with runAsNonRoot false',
    forge: (pod) => ({
      ...pod,
      spec: {
        ...pod.spec!,
        containers: pod.spec!.containers.map((c) => ({ ...c, securityContext: { ...c.securityContext, runAsNonRoot: false } })),
      },
    }),
    refused: `${REFUSED} make only pods whose containers run with runAsNonRoot true and not as user 0, not sandbox`,
  },
  {
    case: "user 0 from the pod's security context",
    forge: (pod) => ({
      ...pod,
      spec: {
        ...pod.spec!,
        securityContext: { ...pod.spec!.securityContext, runAsUser: 0 },
        containers: pod.spec!.containers.map((c) => ({ ...c, securityContext: { ...c.securityContext, runAsUser: undefined } })),
      },
    }),
    refused: 'runAsNonRoot true and not as user 0, not sandbox',
  },
  {
    case: 'an unconfined seccomp profile',
    forge: (pod) => ({
      ...pod,
      spec: {
        ...pod.spec!,
        containers: pod.spec!.containers.map((c) => ({
          ...c,
          securityContext: { ...c.securityContext, seccompProfile: { type: 'Unconfined' } },
        })),
      },
    }),
    refused: `${REFUSED} make only pods whose containers have a RuntimeDefault or Localhost seccomp profile, not sandbox`,
  },
  {
    case: "no operator's label",
    forge: (pod) => {
      const { 'app.kubernetes.io/managed-by': _managedBy, ...labels } = pod.metadata!.labels!;
      return { ...pod, metadata: { ...pod.metadata!, labels } };
    },
    refused: `${REFUSED} create and change only pods carrying its label app.kubernetes.io/managed-by: chamvi-operator`,
  },
];

/** What each forbidden pod met with RBAC alone, before the policy: undefined when created. */
let podsBeforePolicy: Refusal[];
/** The foreign ConfigMap's rewrite, relabel, deletion, and a foreign NetworkPolicy's deletion, before the policy. */
let foreignBeforePolicy: Record<string, Refusal>;

const configMap = (name: string, labels?: Record<string, string>) => ({
  metadata: { name, namespace: NS, ...(labels ? { labels } : {}) },
  data: { 'settings.yaml': 'database: prod' },
});
const foreignPolicy = (name: string) => ({
  metadata: { name, namespace: NS },
  spec: { podSelector: { matchLabels: { app: 'database' } }, policyTypes: ['Ingress'], ingress: [] },
});

/** Writes a compromised operator might make to the application's objects; each is tried before and after the policy on fresh objects. */
async function foreignWrites(suffix: string): Promise<Record<string, Refusal>> {
  await kubectlOk(['create', 'configmap', `app-config-${suffix}`, '-n', NS, '--from-literal=settings.yaml=database: prod']);
  await kubectlOk(['create', 'configmap', `app-relabel-${suffix}`, '-n', NS, '--from-literal=settings.yaml=database: prod']);
  await kubectlOk(['create', 'configmap', `app-delete-${suffix}`, '-n', NS, '--from-literal=settings.yaml=database: prod']);
  await admin.makeApiClient(NetworkingV1Api).createNamespacedNetworkPolicy({ namespace: NS, body: foreignPolicy(`database-${suffix}`) });
  await admin.makeApiClient(NetworkingV1Api).createNamespacedNetworkPolicy({ namespace: NS, body: foreignPolicy(`widen-${suffix}`) });
  await kubectlOk(['run', `app-pod-${suffix}`, '-n', NS, '--image=busybox', '--', 'sleep', '3600']);
  const managed = { 'app.kubernetes.io/managed-by': 'chamvi-operator' };
  return {
    'create an unlabelled ConfigMap': await refusalOf(() =>
      core.createNamespacedConfigMap({ namespace: NS, body: configMap(`unlabelled-${suffix}`) }),
    ),
    "rewrite the application's ConfigMap": await refusalOf(() =>
      core.replaceNamespacedConfigMap({ namespace: NS, name: `app-config-${suffix}`, body: configMap(`app-config-${suffix}`) }),
    ),
    "put its label on the application's ConfigMap and rewrite it": await refusalOf(() =>
      core.replaceNamespacedConfigMap({
        namespace: NS,
        name: `app-relabel-${suffix}`,
        body: configMap(`app-relabel-${suffix}`, { 'app.kubernetes.io/managed-by': 'chamvi-operator' }),
      }),
    ),
    "delete the application's ConfigMap": await refusalOf(() => kube.deleteConfigMap(NS, `app-delete-${suffix}`)),
    'create a ConfigMap with its label but of no run (aws-auth)': await refusalOf(() =>
      core.createNamespacedConfigMap({ namespace: NS, body: configMap(`aws-auth-${suffix}`, managed) }),
    ),
    "delete the application's pod": await refusalOf(() => kube.deletePod(NS, `app-pod-${suffix}`)),
    "delete the application's NetworkPolicy": await refusalOf(() => kube.deleteNetworkPolicy(NS, `database-${suffix}`)),
    'create an allow-all NetworkPolicy over the application with its label': await refusalOf(() =>
      networking.createNamespacedNetworkPolicy({
        namespace: NS,
        body: {
          metadata: { name: `open-${suffix}`, namespace: NS, labels: { 'app.kubernetes.io/managed-by': 'chamvi-operator' } },
          spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{}] },
        },
      }),
    ),
    'create an allow-all NetworkPolicy with its label over an isolation probe label': await refusalOf(() =>
      networking.createNamespacedNetworkPolicy({
        namespace: NS,
        body: {
          metadata: { name: `probe-open-${suffix}`, namespace: NS, labels: managed },
          spec: {
            podSelector: { matchLabels: { 'chamvi.dev/isolation-probe': 'x' } },
            policyTypes: ['Ingress', 'Egress'],
            ingress: [{}],
            egress: [{}],
          },
        },
      }),
    ),
    'make its egress policy open to everywhere': await refusalOf(() =>
      networking.createNamespacedNetworkPolicy({
        namespace: NS,
        body: {
          ...sandboxEgressPolicy(NS, config),
          spec: {
            ...sandboxEgressPolicy(NS, config).spec!,
            egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0' } }], ports: [{ port: 443 }] }],
          },
        },
      }),
    ),
    "widen the application's NetworkPolicy to every pod": await refusalOf(() =>
      networking.replaceNamespacedNetworkPolicy({
        namespace: NS,
        name: `widen-${suffix}`,
        body: { ...foreignPolicy(`widen-${suffix}`), spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{}] } },
      }),
    ),
  };
}

/** A KubeConfig for the admin's cluster holding a real token of the operator's ServiceAccount (exec would ignore impersonation). */
async function operatorKubeConfig(): Promise<KubeConfig> {
  const token = (await kubectlOk(['create', 'token', OPERATOR, '-n', NS, '--duration=1h'])).trim();
  const cluster = admin.getCurrentCluster()!;
  const operator = new KubeConfig();
  operator.loadFromOptions({
    clusters: [cluster],
    users: [{ name: OPERATOR, token }],
    contexts: [{ name: OPERATOR, cluster: cluster.name, user: OPERATOR }],
    currentContext: OPERATOR,
  });
  return operator;
}

/** The operator's pod as it stands, for the pool pod's claim. */
const podOf = (name: string) => kubectlJson<V1Pod>(['get', 'pod', name, '-n', NS]);

beforeAll(async () => {
  await createNamespace(NS);
  admin = new KubeConfig();
  admin.loadFromFile(kubeconfigPath());
  // The release installed in NS watching NS, with a warm pool (its RBAC then grants patch on pods).
  const rendered = await helm([
    'template',
    RELEASE,
    chartDir,
    '--namespace',
    NS,
    '--set',
    `config.watchNamespaces={${NS}}`,
    '--set-json',
    `config.warmPools=${JSON.stringify([pool])}`,
  ]);
  if (rendered.code !== 0) throw new Error(rendered.stderr);
  const manifests = parseAllDocuments(rendered.stdout)
    .map((doc) => doc.toJS() as RenderedManifest | null)
    .filter((doc): doc is RenderedManifest => doc !== null);
  const rbac = manifests.filter((doc) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(doc.kind) && doc.metadata.name === OPERATOR);
  expect(rbac.map((doc) => `${doc.kind} ${doc.metadata.namespace}`).sort()).toEqual([
    `Role ${NS}`,
    `RoleBinding ${NS}`,
    `ServiceAccount ${NS}`,
  ]);
  policies = manifests.filter(
    (doc) => doc.kind.startsWith('ValidatingAdmissionPolicy') && doc.metadata.name === `${OPERATOR}-operator-writes`,
  );
  // Bound everywhere (no matchResources), matching the operator's ServiceAccount alone.
  expect(policies.map((doc) => doc.kind).sort()).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
  for (const doc of policies) {
    if (doc.kind === 'ValidatingAdmissionPolicyBinding') expect(doc.spec!.matchResources).toBeUndefined();
    else
      expect(doc.spec!.matchConditions).toEqual([
        { name: 'operator', expression: expect.stringContaining(`'system:serviceaccount:${NS}:${OPERATOR}'`) },
      ]);
  }
  await applyManifests(rbac);
  await kubectlOk(['create', 'serviceaccount', 'ci', '-n', NS]);
  await admin.makeApiClient(NodeV1Api).createRuntimeClass({ body: { metadata: { name: RUNTIME_CLASS }, handler: 'runsc' } });

  operatorConfig = await operatorKubeConfig();
  kube = createKubeGateway(operatorConfig);
  warmPools = kubernetesWarmPoolGateway(operatorConfig);
  core = operatorConfig.makeApiClient(CoreV1Api);
  networking = operatorConfig.makeApiClient(NetworkingV1Api);
  run = await createPodOwnerRun(admin, NS, 'owner');

  // RBAC alone: the operator makes every forbidden pod (its Role has just been bound: retry a moment).
  const deadline = Date.now() + 30_000;
  while ((await refusalOf(() => core.listNamespacedPod({ namespace: NS })))?.code === 403 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  podsBeforePolicy = [];
  for (const { forge } of forbiddenPods) podsBeforePolicy.push(await refusalOf(() => kube.createPod(forge(sandboxPod()))));
  foreignBeforePolicy = await foreignWrites('before');
  // The open egress policy made by RBAC alone would hold the name the builder's test makes its own under.
  await kubectlOk(['delete', 'networkpolicy', SANDBOX_EGRESS_POLICY, '-n', NS]);

  await applyManifests(policies);
  // A new policy takes a moment to be enforced: wait until a pod of another ServiceAccount is refused.
  for (;;) {
    const probe = await refusalOf(() => kube.createPod({ ...sandboxPod(), spec: { ...sandboxPod().spec!, serviceAccountName: 'ci' } }));
    if (probe?.message.includes(REFUSED)) return;
    if (Date.now() > deadline + 30_000)
      throw new Error(`the operator write policy is not enforced: ${probe?.message ?? 'the pod was created'}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}, 120_000);

afterAll(async () => {
  await deleteManifests(policies);
  await kubectl(['delete', 'runtimeclass', RUNTIME_CLASS, '--ignore-not-found']);
  await deleteNamespace(NS);
});

describe("the operator's ServiceAccount against the real API server, with its write policy", () => {
  it("makes a run's sandbox pod, with the default image, a custom image and a run's RuntimeClass, through its own gateway", async () => {
    const custom = await createPodOwnerRun(admin, NS, 'custom', {
      sandbox: { image: 'registry.example/team/builder:1', runtimeClassName: RUNTIME_CLASS },
    });
    for (const each of [run, custom]) {
      const answer = await kube.createPod(buildSandboxPod(each, config));
      expect(answer).toEqual({ created: expect.objectContaining({ metadata: expect.objectContaining({ name: expect.any(String) }) }) });
    }
    const customPod = await podOf(buildSandboxPod(custom, config).metadata!.name!);
    expect(customPod.spec).toMatchObject({
      runtimeClassName: RUNTIME_CLASS,
      initContainers: [expect.objectContaining({ name: 'chamvi-tools' })],
    });
  });

  it("makes a warm pool pod and its deny-all, claims the pod for a run (the pool's patch), and makes an isolation probe pod and policy", async () => {
    expect(await refusalOf(() => warmPools.createPoolNetworkPolicy(warmPoolNetworkPolicy(pool)))).toBeUndefined();
    const poolPod = await warmPools.createPoolPod(warmPoolPod(pool, config, run));
    const claimer = await createPodOwnerRun(admin, NS, 'claimer');
    const claimed = await warmPools.claimPod(NS, poolPod.metadata!.name!, claimPatch(claimer, pool, 600, poolPod.metadata!.uid!));
    expect(claimed?.metadata?.ownerReferences).toEqual([expect.objectContaining({ uid: claimer.metadata.uid })]);

    const probePod = await core.createNamespacedPod({ namespace: NS, body: buildIsolationProbePod(NS, 'abc123', config, 60) });
    expect(
      await refusalOf(() =>
        networking.createNamespacedNetworkPolicy({ namespace: NS, body: buildIsolationProbePolicy(NS, 'abc123', probePod.metadata!.uid!) }),
      ),
    ).toBeUndefined();
  });

  it("makes, replaces and deletes the namespace's sandbox deny-all", async () => {
    expect(await kube.createNetworkPolicy(sandboxDenyAllPolicy(NS))).toBeUndefined();
    const held = await networking.readNamespacedNetworkPolicy({ namespace: NS, name: SANDBOX_DENY_ALL_POLICY });
    const replacement = sandboxDenyAllPolicy(NS);
    await kube.replaceNetworkPolicy({
      ...replacement,
      metadata: { ...replacement.metadata, resourceVersion: held.metadata!.resourceVersion },
    });
    await kube.deleteNetworkPolicy(NS, SANDBOX_DENY_ALL_POLICY);
    expect((await kubectl(['get', 'networkpolicy', SANDBOX_DENY_ALL_POLICY, '-n', NS])).stderr).toMatch(/NotFound/);
  });

  it("makes the namespace's egress policy to the proxy's pods, and replaces it with one to the proxy's CIDR", async () => {
    expect(await kube.createNetworkPolicy(sandboxEgressPolicy(NS, config))).toBeUndefined();
    const held = await networking.readNamespacedNetworkPolicy({ namespace: NS, name: SANDBOX_EGRESS_POLICY });
    const outside = sandboxEgressPolicy(NS, { ...config, egressProxy: { ...config.egressProxy, ipBlock: '192.0.2.2/32' } });
    expect(outside.spec!.egress).toEqual([
      { to: [{ ipBlock: { cidr: '192.0.2.2/32' } }], ports: [expect.objectContaining({ port: 3128 })] },
    ]);
    await kube.replaceNetworkPolicy({ ...outside, metadata: { ...outside.metadata, resourceVersion: held.metadata!.resourceVersion } });
    await kube.deleteNetworkPolicy(NS, SANDBOX_EGRESS_POLICY);
  });

  it('deletes its own pods: a run sandbox, a pool pod and an isolation probe pod', async () => {
    const owner = await createPodOwnerRun(admin, NS, 'deleted');
    const sandbox = buildSandboxPod(owner, config);
    await kube.createPod(sandbox);
    const poolPod = await warmPools.createPoolPod(warmPoolPod(pool, config, run));
    const probes = createIsolationProbeKube(operatorConfig);
    const probePod = await probes.createPod(buildIsolationProbePod(NS, 'deleted', config, 60));
    await kube.deletePod(NS, sandbox.metadata!.name!);
    await warmPools.deletePod(NS, poolPod.metadata!.name!, { uid: poolPod.metadata!.uid! });
    await probes.deletePod(NS, probePod.metadata!.name!);
  });

  it("sweeps as isolation probe leftovers only its own objects, not a tenant's carrying the probe label (which it may not delete)", async () => {
    const probes = createIsolationProbeKube(operatorConfig);
    const probePod = await probes.createPod(buildIsolationProbePod(NS, 'left', config, 60));
    await probes.createNetworkPolicy(buildIsolationProbePolicy(NS, 'left', probePod.metadata!.uid!));
    const tenantLabels = { 'chamvi.dev/isolation-probe': 'x' };
    await admin.makeApiClient(NetworkingV1Api).createNamespacedNetworkPolicy({
      namespace: NS,
      body: {
        metadata: { name: 'tenant-probe-label', namespace: NS, labels: tenantLabels },
        spec: { podSelector: {}, policyTypes: ['Ingress'] },
      },
    });
    await kubectlOk(['run', 'tenant-probe-label', '-n', NS, '--image=busybox', '--labels=chamvi.dev/isolation-probe=x', '--', 'true']);
    expect(await refusalOf(() => probes.deleteNetworkPolicy(NS, 'tenant-probe-label'))).toMatchObject({ code: 403 });

    const leftovers = await probes.listLeftovers(NS);
    expect(leftovers.policies).toContain(isolationProbeName('left'));
    expect(leftovers.policies).not.toContain('tenant-probe-label');
    expect(leftovers.pods).not.toContain('tenant-probe-label');
    expect(leftovers.pods).toContain(isolationProbeName('left'));
    for (const name of leftovers.policies) await probes.deleteNetworkPolicy(NS, name);
    for (const name of leftovers.pods) await probes.deletePod(NS, name);
  });

  it('writes, rewrites and deletes its own ConfigMaps: the finished-runs record and a diff', async () => {
    const record = {
      uid: 'u-1',
      specSha256: 'a'.repeat(64),
      phase: 'Succeeded' as const,
      reason: 'Completed',
      completionTime: '2026-01-01T00:00:00Z',
      deletedAt: '2026-01-01T00:01:00Z',
    };
    await kube.recordFinishedRun(NS, 'first', record);
    await kube.recordFinishedRun(NS, 'second', { ...record, uid: 'u-2' });
    const resources = kubernetesRunResources(operatorConfig);
    const first = await resources.writeDiff(run, 'diff --git a/x b/x\n', { kind: 'snapshot' });
    expect(first.outcome).toBe('written');
    expect(await resources.writeDiff(run, 'diff --git a/y b/y\n', { kind: 'final', written: first.configMap })).toMatchObject({
      outcome: 'written',
    });
    for (const name of [first.configMap, FINISHED_RUNS_CONFIG_MAP]) {
      await kube.deleteConfigMap(NS, name);
      expect((await kubectl(['get', 'configmap', name, '-n', NS])).stderr).toMatch(/NotFound/);
    }
  });

  it('type-checks: the API server finds no expression of the policy wrong for pods, ConfigMaps or NetworkPolicies', async () => {
    const policy = await kubectlJson<{ status?: { typeChecking?: { expressionWarnings?: unknown[] } } }>([
      'get',
      'validatingadmissionpolicy',
      `${OPERATOR}-operator-writes`,
    ]);
    expect(policy.status?.typeChecking).toBeDefined();
    expect(policy.status?.typeChecking?.expressionWarnings).toBeUndefined();
  });

  it('was let make every forbidden pod, and the foreign writes, by RBAC alone, before the policy', () => {
    expect(forbiddenPods.map((forbidden, index) => [forbidden.case, podsBeforePolicy[index]])).toEqual(
      forbiddenPods.map((forbidden) => [forbidden.case, undefined]),
    );
    expect(foreignBeforePolicy).toEqual(Object.fromEntries(Object.keys(foreignBeforePolicy).map((write) => [write, undefined])));
  });

  it.each(forbiddenPods)('may not make a pod with $case', async ({ forge, refused }) => {
    const pod = forge(sandboxPod());
    expect(await refusalOf(() => kube.createPod(pod))).toEqual({ code: 403, message: expect.stringContaining(refused) });
    expect((await kubectl(['get', 'pod', pod.metadata!.name!, '-n', NS])).stderr).toMatch(/NotFound/);
  });

  it('may not patch a pod that is not its own, nor take its label off its own', async () => {
    await kubectlOk(['run', 'ci-job', '-n', NS, '--image=busybox', '--overrides={"spec":{"serviceAccountName":"ci"}}', '--', 'true']);
    const relabel = [
      { op: 'add', path: '/metadata/labels', value: { 'app.kubernetes.io/managed-by': 'chamvi-operator', 'chamvi.dev/run-uid': 'x' } },
    ];
    expect(await refusalOf(() => core.patchNamespacedPod({ namespace: NS, name: 'ci-job', body: relabel }))).toEqual({
      code: 403,
      message: expect.stringContaining(`${REFUSED} create and change only pods carrying its label`),
    });
    const own = await warmPools.createPoolPod(warmPoolPod(pool, config, run));
    const strip = [{ op: 'remove', path: '/metadata/labels/app.kubernetes.io~1managed-by' }];
    expect(await refusalOf(() => core.patchNamespacedPod({ namespace: NS, name: own.metadata!.name!, body: strip }))).toEqual({
      code: 403,
      message: expect.stringContaining(`${REFUSED} create and change only pods carrying its label`),
    });
  });

  it("may not create, rewrite, relabel or delete the application's ConfigMaps, nor delete or widen its NetworkPolicies", async () => {
    const after = await foreignWrites('after');
    expect(after).toEqual({
      'create an unlabelled ConfigMap': {
        code: 403,
        message: expect.stringContaining(`${REFUSED} write and delete only its own ConfigMaps`),
      },
      "rewrite the application's ConfigMap": { code: 403, message: expect.stringContaining('only its own ConfigMaps') },
      "put its label on the application's ConfigMap and rewrite it": {
        code: 403,
        message: expect.stringContaining('only its own ConfigMaps'),
      },
      "delete the application's ConfigMap": {
        code: 403,
        message: expect.stringContaining('chamvi-finished-runs), not app-delete-after'),
      },
      'create a ConfigMap with its label but of no run (aws-auth)': {
        code: 403,
        message: expect.stringContaining(
          `${REFUSED} create only ConfigMaps of a run (label chamvi.dev/run-uid and that CodingRun as controller) or chamvi-finished-runs, not aws-auth-after`,
        ),
      },
      "delete the application's pod": {
        code: 403,
        message: expect.stringContaining(
          `${REFUSED} delete only pods carrying its label app.kubernetes.io/managed-by: chamvi-operator, not app-pod-after`,
        ),
      },
      "delete the application's NetworkPolicy": {
        code: 403,
        message: expect.stringContaining(
          `${REFUSED} write and delete only its own NetworkPolicies (label app.kubernetes.io/managed-by: chamvi-operator), not database-after`,
        ),
      },
      'create an allow-all NetworkPolicy over the application with its label': {
        code: 403,
        message: expect.stringContaining(`${REFUSED} make only NetworkPolicies that select sandbox pods`),
      },
      'create an allow-all NetworkPolicy with its label over an isolation probe label': {
        code: 403,
        message: expect.stringContaining(`${REFUSED} make only NetworkPolicies that allow nothing, or its egress policy`),
      },
      'make its egress policy open to everywhere': {
        code: 403,
        message: expect.stringContaining(`whose rules each name the proxy and its ports, not ${SANDBOX_EGRESS_POLICY}`),
      },
      "widen the application's NetworkPolicy to every pod": { code: 403, message: expect.stringContaining('only its own NetworkPolicies') },
    });
    const data = (name: string) =>
      kubectlJson<{ data: Record<string, string>; metadata: { labels?: object } }>(['get', 'configmap', name, '-n', NS]);
    expect(await data('app-config-after')).toMatchObject({ data: { 'settings.yaml': 'database: prod' } });
    expect((await data('app-relabel-after')).metadata.labels).toBeUndefined();
    expect((await data('app-delete-after')).data).toEqual({ 'settings.yaml': 'database: prod' });
    const database = await kubectlJson<{ spec: object }>(['get', 'networkpolicy', 'database-after', '-n', NS]);
    expect(database.spec).toMatchObject({ podSelector: { matchLabels: { app: 'database' } } });
    expect((await podOf('app-pod-after')).metadata?.deletionTimestamp).toBeUndefined();
  });

  it('concerns no other writer: the admin makes a CI pod, rewrites and deletes the ConfigMaps and NetworkPolicies', async () => {
    await kubectlOk([
      'run',
      'ci-admin',
      '-n',
      NS,
      '--image=busybox',
      '--overrides={"spec":{"serviceAccountName":"ci","hostNetwork":true}}',
      '--',
      'true',
    ]);
    await kubectlOk(['label', 'configmap', 'app-config-after', '-n', NS, 'edited=yes']);
    await kubectlOk(['delete', 'configmap', 'app-delete-after', '-n', NS]);
    await kubectlOk(['delete', 'networkpolicy', 'database-after', '-n', NS]);
  });
});
