// A warm pool pod against the real API server and kwok: claims of one pod raced by many runs
// leave exactly one winner (the API server applies the claim patch's test and remove as one
// update), and a claimed pool pod is a sandbox like any other: it passes the one Sandbox
// contract, through an exec that checks the pod is the claiming run's, also when its tool
// session was opened ahead, before the claim (sandbox/warm-sessions.ts). A session opened
// ahead goes to no other run, and to no pod that took the claimed pod's name.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { kubernetesWarmPoolGateway, type WarmPoolGateway } from '../../operator/src/kube/warm-pool-gateway.ts';
import { RUN_LABEL, RUN_UID_LABEL } from '../../operator/src/api/index.ts';
import { KubernetesExecTransport } from '../../operator/src/sandbox/kubernetes-exec-transport.ts';
import { createKubernetesSandbox, warmSessionStarter } from '../../operator/src/sandbox/kubernetes-sandbox.ts';
import type { ToolboxProcess } from '../../operator/src/sandbox/toolbox-transport.ts';
import { WarmSessions } from '../../operator/src/sandbox/warm-sessions.ts';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { sandboxPodShape } from '../../operator/src/reconcile/admitted-pod.ts';
import { SANDBOX_CONTAINER, buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import {
  CLAIMED_FROM_LABEL,
  WARM_POOL_LABEL,
  claimPatch,
  warmPoolPod,
  type WarmPoolConfig,
} from '../../operator/src/reconcile/warm-pool.ts';
import { labelPointer } from '../../operator/src/reconcile/json-pointer.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl, kubectlCreate, kubectlOk } from '../support/cluster.ts';
import { createPodOwnerRun } from '../support/pod-owner-run.ts';
import { describeSandboxContract } from '../support/sandbox-contract.ts';
import { SANDBOX_POD_SELECTOR, startSandboxExecRegistrar, type SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';

const namespace = `warm-claim-${process.pid}`;
const testLabel = 'chamvi.dev/test';
const pool: WarmPoolConfig = { name: 'pool', namespace, size: 1 };
const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'] }, {});

let kubeConfig: KubeConfig;
let gateway: WarmPoolGateway;
let registrar: SandboxExecRegistrar;
let rootDir: string;
let runCount = 0;

/** A run to claim a pool pod (or be its template), named claimer-1, claimer-2... */
const createRun = (): Promise<ParsedCodingRun> => createPodOwnerRun(kubeConfig, namespace, `claimer-${(runCount += 1)}`);

/** A pool pod as the pool loop creates it (plus the test's label for the registrar), Ready and wired to a workspace. */
async function readyPoolPod(): Promise<V1Pod> {
  const template = await createRun();
  const pod = warmPoolPod(pool, config, template);
  pod.metadata!.labels = { ...pod.metadata!.labels, [testLabel]: namespace };
  const created: V1Pod = await gateway.createPoolPod(pod);
  const name = created.metadata!.name!;
  const ready = await kubectl(['wait', '-n', namespace, '--for=condition=Ready', `pod/${name}`, '--timeout=60s']);
  expect(ready.code).toBe(0);
  await registrar.waitForWorkspace(namespace, name);
  return created;
}

const toolboxCommand = [process.execPath, DEFAULT_TOOLBOX_PATH];

/** Sessions opened ahead as the operator's pool loop opens them; `opened` lists each process the starter made. */
function sessionsAhead() {
  const opened: ToolboxProcess[] = [];
  const start = warmSessionStarter({ kubeConfig, container: SANDBOX_CONTAINER, toolboxCommand });
  const sessions = new WarmSessions(
    async (pod) => {
      const process = await start(pod);
      opened.push(process);
      return process;
    },
    { logger: { warn: () => {} } },
  );
  /** Opens a session ahead into the pool pod and resolves once it is open. */
  const openInto = async (pod: V1Pod) => {
    sessions.keep([{ namespace, name: pod.metadata!.name!, uid: pod.metadata!.uid! }]);
    while (opened.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    return opened[0]!;
  };
  return { sessions, openInto };
}

/**
 * The run's exec transport as the workers make it: only into a pod the run controls and that
 * carries nothing the operator did not put there, a session opened ahead taken when it may be.
 */
const runTransport = (podName: string, run: ParsedCodingRun, sessions: WarmSessions) =>
  new KubernetesExecTransport({
    kubeConfig,
    namespace,
    podName,
    container: SANDBOX_CONTAINER,
    toolboxCommand,
    expectedOwnerUid: run.metadata.uid,
    expectedPodShape: sandboxPodShape(run, config),
    connectTimeoutMs: 5_000,
    warmSessions: sessions,
  });

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  gateway = kubernetesWarmPoolGateway(kubeConfig);
  await createNamespace(namespace, { restricted: true });
  rootDir = mkdtempSync(path.join(tmpdir(), 'chamvi-warm-claim-'));
  registrar = await startSandboxExecRegistrar({
    kubeconfig: kubeconfigPath(),
    rootDir,
    labelSelector: `${SANDBOX_POD_SELECTOR},${testLabel}=${namespace}`,
  });
}, 60_000);

afterAll(async () => {
  await registrar?.stop();
  await deleteNamespace(namespace);
  if (rootDir) rmSync(rootDir, { recursive: true, force: true });
});

describe('claiming a warm pool pod', () => {
  it('of ten runs racing for one pod, exactly one gets it, and the pod then carries that run alone', async () => {
    const poolPod = await readyPoolPod();
    const [podName, uid] = [poolPod.metadata!.name!, poolPod.metadata!.uid!];
    const runs = await Promise.all(Array.from({ length: 10 }, () => createRun()));
    const results = await Promise.all(runs.map((run) => gateway.claimPod(namespace, podName, claimPatch(run, pool, 600, uid))));
    const winners = runs.filter((_, index) => results[index] !== undefined);
    expect(winners).toHaveLength(1);
    const pod = JSON.parse((await kubectl(['get', 'pod', podName, '-n', namespace, '-o', 'json'])).stdout) as {
      metadata: { labels: Record<string, string>; ownerReferences: Array<{ uid: string; controller: boolean }> };
      spec: { activeDeadlineSeconds: number };
    };
    expect(pod.metadata.labels[WARM_POOL_LABEL]).toBeUndefined();
    expect(pod.metadata.labels[RUN_UID_LABEL]).toBe(winners[0]!.metadata.uid);
    expect(pod.metadata.ownerReferences).toEqual([expect.objectContaining({ uid: winners[0]!.metadata.uid, controller: true })]);
    expect(pod.spec.activeDeadlineSeconds).toBe(600);
    // Claimed once, never again: a later claim of the same pod fails too.
    expect(await gateway.claimPod(namespace, podName, claimPatch(await createRun(), pool, 600, uid))).toBeUndefined();
  }, 90_000);

  it('is not deleted by a pool loop that saw it before the claim: the delete names the pod as it was seen', async () => {
    // A leader hand-over: the new leader's cache still shows the pod unclaimed, and not made by
    // it, so its pass deletes it, while the old leader's claim already gave it to a run.
    const seen = await readyPoolPod();
    const podName = seen.metadata!.name!;
    const claimed = await gateway.claimPod(namespace, podName, claimPatch(await createRun(), pool, 600, seen.metadata!.uid!));
    expect(claimed).toBeDefined();
    await gateway.deletePod(namespace, podName, { uid: seen.metadata!.uid!, resourceVersion: seen.metadata!.resourceVersion! });
    const after = JSON.parse(await kubectlOk(['get', 'pod', podName, '-n', namespace, '-o', 'json'])) as V1Pod;
    expect(after.metadata!.deletionTimestamp).toBeUndefined();
    // Seen as it is now, it goes.
    await gateway.deletePod(namespace, podName, { uid: after.metadata!.uid!, resourceVersion: after.metadata!.resourceVersion! });
    const gone = JSON.parse(
      (await kubectl(['get', 'pod', podName, '-n', namespace, '-o', 'json', '--ignore-not-found'])).stdout || '{}',
    ) as V1Pod;
    expect(gone.metadata?.deletionTimestamp !== undefined || gone.metadata === undefined).toBe(true);
  }, 90_000);

  it('is never claimed by a second run: not given the pool label back, nor stripped of its run too', async () => {
    const poolPod = await readyPoolPod();
    const [podName, uid] = [poolPod.metadata!.name!, poolPod.metadata!.uid!];
    const runA = await createRun();
    expect(await gateway.claimPod(namespace, podName, claimPatch(runA, pool, 600, uid))).toBeDefined();
    const podNow = async () => JSON.parse(await kubectlOk(['get', 'pod', podName, '-n', namespace, '-o', 'json'])) as V1Pod;
    // A namespace member puts the pool label back on run A's pod (its processes and workspace in it).
    await kubectlOk(['label', 'pod', podName, '-n', namespace, `${WARM_POOL_LABEL}=${pool.name}`]);
    const runB = await createRun();
    expect(await gateway.claimPod(namespace, podName, claimPatch(runB, pool, 600, uid))).toBeUndefined();
    expect((await podNow()).metadata?.ownerReferences).toEqual([expect.objectContaining({ uid: runA.metadata.uid })]);
    // And takes off run A's owner and labels too: the deadline a claim set cannot be taken off.
    const scrub = [
      { op: 'remove', path: '/metadata/ownerReferences' },
      ...[RUN_UID_LABEL, RUN_LABEL, CLAIMED_FROM_LABEL].map((key) => ({ op: 'remove', path: labelPointer(key) })),
    ];
    await kubectlOk(['patch', 'pod', podName, '-n', namespace, '--type=json', '-p', JSON.stringify(scrub)]);
    const unset = await kubectl([
      'patch',
      'pod',
      podName,
      '-n',
      namespace,
      '--type=json',
      '-p',
      '[{"op":"remove","path":"/spec/activeDeadlineSeconds"}]',
    ]);
    expect(unset.code).not.toBe(0);
    expect(await gateway.claimPod(namespace, podName, claimPatch(runB, pool, 600, uid))).toBeUndefined();
    const after = await podNow();
    expect(after.metadata?.ownerReferences ?? []).toEqual([]);
    expect(after.metadata?.labels?.[RUN_UID_LABEL]).toBeUndefined();
  }, 90_000);

  it('claims only the pod the pool loop made: not another pod made since under its name, with the pool labels', async () => {
    const poolPod = await readyPoolPod();
    const podName = poolPod.metadata!.name!;
    await kubectlOk(['delete', 'pod', podName, '-n', namespace, '--grace-period=0', '--force', '--wait=true']);
    // Someone who may create pods plants one under the name, with the pool's labels.
    await kubectlCreate({
      ...warmPoolPod(pool, config, await createRun()),
      metadata: { ...poolPod.metadata, uid: undefined, resourceVersion: undefined, creationTimestamp: undefined, managedFields: undefined },
    });
    const run = await createRun();
    expect(await gateway.claimPod(namespace, podName, claimPatch(run, pool, 600, poolPod.metadata!.uid!))).toBeUndefined();
    const planted = JSON.parse((await kubectl(['get', 'pod', podName, '-n', namespace, '-o', 'json'])).stdout) as V1Pod;
    expect(planted.metadata?.labels?.[WARM_POOL_LABEL]).toBe(pool.name);
    expect(planted.metadata?.ownerReferences ?? []).toEqual([]);
  }, 90_000);

  // The claim's test of deletionTimestamp against null passes on every claim here (no pod is being deleted) and fails for a
  // field that is there, as the claim marks' tests do above. kwok ends a pod's deletion at once, a finalizer or not: none is held here.
  it('claims no pod changed since it was judged: the claim tests the resourceVersion it was judged at, and writes its seal', async () => {
    const poolPod = await readyPoolPod();
    const [podName, uid] = [poolPod.metadata!.name!, poolPod.metadata!.uid!];
    const judged = JSON.parse(await kubectlOk(['get', 'pod', podName, '-n', namespace, '-o', 'json'])) as V1Pod;
    const judgedAt = judged.metadata!.resourceVersion!;
    // kubectl set image on the pool pod after the judgement: the one field of its containers a patch can change.
    const image = `${poolPod.spec!.containers[0]!.image!.split(':')[0]}:other`;
    await kubectlOk([
      'patch',
      'pod',
      podName,
      '-n',
      namespace,
      '--type=json',
      '-p',
      JSON.stringify([{ op: 'replace', path: '/spec/containers/0/image', value: image }]),
    ]);
    const as = { resourceVersion: judgedAt, seal: 'a-seal', annotated: judged.metadata?.annotations !== undefined };
    expect(await gateway.claimPod(namespace, podName, claimPatch(await createRun(), pool, 600, uid, as))).toBeUndefined();
    const patched = JSON.parse(await kubectlOk(['get', 'pod', podName, '-n', namespace, '-o', 'json'])) as V1Pod;
    expect(patched.metadata?.ownerReferences ?? []).toEqual([]);
    // The test compares the value as the API server holds it: at the pod's resourceVersion now, the same claim lands.
    const now = { ...as, resourceVersion: patched.metadata!.resourceVersion!, annotated: patched.metadata?.annotations !== undefined };
    const claimed = await gateway.claimPod(namespace, podName, claimPatch(await createRun(), pool, 600, uid, now));
    expect(claimed?.metadata?.annotations?.['chamvi.dev/claim-seal']).toBe('a-seal');
    expect(claimed?.metadata?.ownerReferences).toHaveLength(1);
  }, 90_000);
});

/** The claimed pod's sandbox as the workers open it: only into a pod this run controls, as the operator built it. */
const claimedSandbox = (
  podName: string,
  run: ParsedCodingRun,
  mode: 'call' | 'serve',
  options: { maxResponseBytes?: number } | undefined,
  warmSessions?: WarmSessions,
) =>
  createKubernetesSandbox({
    kubeConfig,
    namespace,
    podName,
    expectedOwnerUid: run.metadata.uid,
    expectedPodShape: sandboxPodShape(run, config),
    container: SANDBOX_CONTAINER,
    toolboxCommand,
    mode,
    defaultTimeoutMs: 60_000,
    ...(warmSessions ? { warmSessions } : {}),
    ...(options?.maxResponseBytes ? { maxResponseBytes: options.maxResponseBytes } : {}),
  });

for (const mode of ['call', 'serve'] as const) {
  describeSandboxContract(`Kubernetes exec into a claimed warm pool pod (${mode})`, async (options) => {
    const pod = await readyPoolPod();
    const podName = pod.metadata!.name!;
    const run = await createRun();
    expect(await gateway.claimPod(namespace, podName, claimPatch(run, pool, 600, pod.metadata!.uid!))).toBeDefined();
    return { sandbox: claimedSandbox(podName, run, mode, options), cleanup: () => gateway.deletePod(namespace, podName) };
  });
}

describeSandboxContract('Kubernetes exec into a claimed warm pool pod, its session opened ahead before the claim', async (options) => {
  const pod = await readyPoolPod();
  const podName = pod.metadata!.name!;
  const { sessions, openInto } = sessionsAhead();
  await openInto(pod);
  const run = await createRun();
  expect(await gateway.claimPod(namespace, podName, claimPatch(run, pool, 600, pod.metadata!.uid!))).toBeDefined();
  return { sandbox: claimedSandbox(podName, run, 'serve', options, sessions), cleanup: () => gateway.deletePod(namespace, podName) };
});

describe('a tool session opened ahead into a warm pool pod', () => {
  it('is the first session of the run that claimed the pod, after the read of the pod shows it the run’s', async () => {
    const pod = await readyPoolPod();
    const { sessions, openInto } = sessionsAhead();
    const held = await openInto(pod);
    const run = await createRun();
    expect(await gateway.claimPod(namespace, pod.metadata!.name!, claimPatch(run, pool, 600, pod.metadata!.uid!))).toBeDefined();
    expect(await runTransport(pod.metadata!.name!, run, sessions).start(['serve'])).toBe(held);
    held.kill();
  }, 90_000);

  it('goes to no other run: that run is refused the pod, and the session is closed', async () => {
    const pod = await readyPoolPod();
    const { sessions, openInto } = sessionsAhead();
    const held = await openInto(pod);
    const claimer = await createRun();
    const other = await createRun();
    expect(await gateway.claimPod(namespace, pod.metadata!.name!, claimPatch(claimer, pool, 600, pod.metadata!.uid!))).toBeDefined();
    await expect(runTransport(pod.metadata!.name!, other, sessions).start(['serve'])).rejects.toThrow("is not the run's");
    await held.exited;
    expect(await sessions.take(namespace, pod.metadata!.name!)).toBeUndefined();
  }, 90_000);

  it('goes to no pod that took the claimed pod’s name: the run gets a session of its own there', async () => {
    const pod = await readyPoolPod();
    const podName = pod.metadata!.name!;
    const { sessions, openInto } = sessionsAhead();
    const held = await openInto(pod);
    const run = await createRun();
    // The pool pod goes, and a pod the run controls is made under its name: another uid.
    await kubectlOk(['delete', 'pod', podName, '-n', namespace, '--grace-period=0', '--force', '--wait=true']);
    const replacement = buildSandboxPod(run, config);
    replacement.metadata!.name = podName;
    replacement.metadata!.labels = { ...replacement.metadata!.labels, [testLabel]: namespace };
    await kubectlCreate(replacement);
    const started = await runTransport(podName, run, sessions)
      .start(['serve'])
      .catch((error: unknown) => error);
    expect(started).not.toBe(held);
    await held.exited;
    if (started && typeof started === 'object' && 'kill' in started) (started as ToolboxProcess).kill();
  }, 90_000);
});
