// The sandbox pod as the real API server admits it (defaults, the ServiceAccount admission in
// a namespace with a `default` ServiceAccount, PodSecurity restricted): the operator's own pods
// carry nothing its check refuses, and a pod carrying what EKS's pod-identity webhook adds
// for an annotated `default` ServiceAccount (a projected token for sts.amazonaws.com, its
// mount, AWS_ROLE_ARN / AWS_WEB_IDENTITY_TOKEN_FILE) is never exec'd into by the run's
// transport, which ends the run SandboxInvalid instead; nor is a pod whose image was changed
// with `kubectl set image` after it was made, to another image or to another digest of its own
// (which a verifying webhook's digest at admission must not let through). The pod is created as the webhook leaves it; the
// exec is kwok's, running commands in a local directory.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REASONS, RunFailure, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { kubernetesWarmPoolGateway } from '../../operator/src/kube/warm-pool-gateway.ts';
import { podAdditions, sandboxPodShape } from '../../operator/src/reconcile/admitted-pod.ts';
import { SANDBOX_CONTAINER, buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { claimPatch, warmPoolPod, type WarmPoolConfig } from '../../operator/src/reconcile/warm-pool.ts';
import { KubernetesExecTransport } from '../../operator/src/sandbox/kubernetes-exec-transport.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl, kubectlCreate, registerPodExec } from '../support/cluster.ts';
import { IRSA_TOKEN_DIR, withIrsa } from '../support/irsa-webhook.ts';
import { createPodOwnerRun } from '../support/pod-owner-run.ts';

const namespace = `admitted-pod-${process.pid}`;
const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'] }, {});

let kubeConfig: KubeConfig;
let runCount = 0;

/** A run to own the test's pods, named run-1, run-2... */
const createRun = (sandbox: Record<string, unknown> = {}): Promise<ParsedCodingRun> =>
  createPodOwnerRun(kubeConfig, namespace, `run-${(runCount += 1)}`, { sandbox });

const readPod = (name: string) => kubeConfig.makeApiClient(CoreV1Api).readNamespacedPod({ namespace, name });

/** Creates the pod, waits for it to be Ready, and makes its exec run commands in a directory of its own. */
async function readyPod(pod: V1Pod): Promise<{ name: string; workDir: string }> {
  await kubectlCreate(pod);
  const name = pod.metadata!.name!;
  const ready = await kubectl(['wait', '-n', namespace, '--for=condition=Ready', `pod/${name}`, '--timeout=60s']);
  expect(ready.code, ready.stderr).toBe(0);
  const workDir = mkdtempSync(join(tmpdir(), 'admitted-pod-exec-'));
  await registerPodExec({ namespace, podName: name, workDir });
  return { name, workDir };
}

/** The run's transport as the workers make it (main.ts sandboxFor): owner and shape checked before each exec. */
const runTransport = (podName: string, run: ParsedCodingRun) =>
  new KubernetesExecTransport({
    kubeConfig,
    namespace,
    podName,
    container: SANDBOX_CONTAINER,
    toolboxCommand: ['sh', '-c'],
    expectedOwnerUid: run.metadata.uid,
    expectedPodShape: sandboxPodShape(run, config),
    connectTimeoutMs: 5_000,
  });

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  await createNamespace(namespace, { restricted: true });
}, 60_000);

afterAll(async () => {
  await deleteNamespace(namespace);
});

describe("the operator's own sandbox pods, as the API server admits them", () => {
  it('carry nothing the check refuses: a run pod, a custom-image pod, a claimed warm pool pod', async () => {
    const plain = await createRun({ env: [{ name: 'CI', value: 'true' }] });
    const custom = await createRun({ image: 'acme/builder:2' });
    await kubectlCreate(buildSandboxPod(plain, config), buildSandboxPod(custom, config));

    const pool: WarmPoolConfig = { name: 'pool', namespace, size: 1 };
    const gateway = kubernetesWarmPoolGateway(kubeConfig);
    const poolPod = await gateway.createPoolPod(warmPoolPod(pool, config, plain));
    const claimer = await createRun();
    const claimed = await gateway.claimPod(namespace, poolPod.metadata!.name!, claimPatch(claimer, pool, 600, poolPod.metadata!.uid!));
    expect(claimed).toBeDefined();

    for (const [run, name] of [
      [plain, buildSandboxPod(plain, config).metadata!.name!],
      [custom, buildSandboxPod(custom, config).metadata!.name!],
      [claimer, poolPod.metadata!.name!],
    ] as const) {
      const admitted = await readPod(name);
      // What the API server did add: the ServiceAccount, and no token volume (automount false).
      expect(admitted.spec!.serviceAccountName).toBe('default');
      expect(admitted.spec!.volumes!.some((volume) => volume.projected)).toBe(false);
      // Its spec changes counted: none since creation, but the claim's (activeDeadlineSeconds) on the pool pod.
      expect(admitted.metadata!.generation).toBe(run === claimer ? 2 : 1);
      expect(podAdditions(admitted, sandboxPodShape(run, config))).toEqual([]);
    }
  }, 90_000);
});

describe('security: no tool runs in a sandbox pod a webhook gave a credential', () => {
  it("refuses to exec into the run's pod carrying a projected service-account token and the AWS variables, and execs into it without them", async () => {
    const run = await createRun();
    const injected = withIrsa(buildSandboxPod(run, config));
    injected.metadata!.name = `${injected.metadata!.name}-irsa`;
    const irsa = await readyPod(injected);
    const clean = await readyPod(buildSandboxPod(run, config));
    try {
      const exec = runTransport(irsa.name, run).start(['touch exec-reached-the-pod']);
      const error = await exec.catch((thrown: unknown) => thrown);
      expect(RunFailure.isInstance(error)).toBe(true);
      expect((error as RunFailure).reason).toBe(REASONS.SandboxInvalid);
      expect((error as Error).message).toContain(`sandbox pod ${namespace}/${irsa.name}`);
      expect((error as Error).message).toContain('volume aws-iam-token (projected: service-account token, audience sts.amazonaws.com)');
      expect((error as Error).message).toContain('env AWS_ROLE_ARN in container sandbox');
      expect((error as Error).message).toContain(`volume mount aws-iam-token at ${IRSA_TOKEN_DIR} in container sandbox`);
      expect((error as Error).message).toContain(
        "remove the eks.amazonaws.com/role-arn annotation from the namespace's default ServiceAccount",
      );
      expect(existsSync(join(irsa.workDir, 'exec-reached-the-pod'))).toBe(false);

      // The control: the run's pod as the operator built it is exec'd into by the same transport.
      const session = await runTransport(clean.name, run).start(['touch exec-reached-the-pod']);
      expect((await session.exited).code).toBe(0);
      expect(existsSync(join(clean.workDir, 'exec-reached-the-pod'))).toBe(true);
    } finally {
      for (const pod of [irsa, clean]) {
        await kubectl(['delete', 'pod', pod.name, '-n', namespace, '--wait=false', '--grace-period=0', '--force']);
        rmSync(pod.workDir, { recursive: true, force: true });
      }
    }
  }, 120_000);

  it("refuses to exec into the run's pod once its image was changed with kubectl set image (security #11.10)", async () => {
    const run = await createRun();
    const pod = await readyPod(buildSandboxPod(run, config));
    try {
      // The control: the pod as the operator made it is exec'd into.
      const session = await runTransport(pod.name, run).start(['touch before-the-patch']);
      expect((await session.exited).code).toBe(0);
      expect(existsSync(join(pod.workDir, 'before-the-patch'))).toBe(true);
      // The API server counts the pod's spec changes (what tells a digest added at admission from one patched in later).
      expect((await readPod(pod.name)).metadata!.generation).toBe(1);

      const patched = await kubectl(['set', 'image', '-n', namespace, `pod/${pod.name}`, `${SANDBOX_CONTAINER}=attacker/tools:1`]);
      expect(patched.code, patched.stderr).toBe(0);
      expect((await readPod(pod.name)).metadata!.generation).toBe(2);
      const error = await runTransport(pod.name, run)
        .start(['touch after-the-patch'])
        .catch((thrown: unknown) => thrown);
      expect(RunFailure.isInstance(error)).toBe(true);
      expect((error as RunFailure).reason).toBe(REASONS.SandboxInvalid);
      expect((error as Error).message).toContain(
        `image attacker/tools:1 (the operator's pod has ${config.sandboxImage}) in container ${SANDBOX_CONTAINER}`,
      );
      expect(existsSync(join(pod.workDir, 'after-the-patch'))).toBe(false);
    } finally {
      await kubectl(['delete', 'pod', pod.name, '-n', namespace, '--wait=false', '--grace-period=0', '--force']);
      rmSync(pod.workDir, { recursive: true, force: true });
    }
  }, 120_000);

  it("refuses to exec into a custom-image pod once another digest of the run's image was set on it, with no restart (security #11.10)", async () => {
    const run = await createRun({ image: 'acme/builder:2' });
    // As a verifying webhook (Kyverno mutateDigest) leaves it at admission: the run's image pinned.
    const made = buildSandboxPod(run, config);
    const container = made.spec!.containers.find((each) => each.name === SANDBOX_CONTAINER)!;
    container.image = `acme/builder:2@sha256:${'0a'.repeat(32)}`;
    const pod = await readyPod(made);
    try {
      const session = await runTransport(pod.name, run).start(['touch before-the-patch']);
      expect((await session.exited).code).toBe(0);
      expect(existsSync(join(pod.workDir, 'before-the-patch'))).toBe(true);

      // Another build of the repository, as on a pod whose container has not started yet: the
      // kubelet would start it from this image, and no restart shows it.
      const other = `acme/builder:2@sha256:${'bb'.repeat(32)}`;
      const patched = await kubectl(['set', 'image', '-n', namespace, `pod/${pod.name}`, `${SANDBOX_CONTAINER}=${other}`]);
      expect(patched.code, patched.stderr).toBe(0);
      const read = await readPod(pod.name);
      expect(read.metadata!.generation).toBe(2);
      expect(read.status!.containerStatuses!.every((status) => status.restartCount === 0)).toBe(true);
      const error = await runTransport(pod.name, run)
        .start(['touch after-the-patch'])
        .catch((thrown: unknown) => thrown);
      expect(RunFailure.isInstance(error)).toBe(true);
      expect((error as RunFailure).reason).toBe(REASONS.SandboxInvalid);
      expect((error as Error).message).toContain(
        `image ${other} (the operator's pod has acme/builder:2; the pod's spec was changed after it was made (generation 2)) in container ${SANDBOX_CONTAINER}`,
      );
      expect(existsSync(join(pod.workDir, 'after-the-patch'))).toBe(false);
    } finally {
      await kubectl(['delete', 'pod', pod.name, '-n', namespace, '--wait=false', '--grace-period=0', '--force']);
      rmSync(pod.workDir, { recursive: true, force: true });
    }
  }, 120_000);
});
