// status.admittedPod against the real API server and kwok: the reconciler records the pod's
// images from the API server's answer to its create, webhooks' rewrites in (here the
// gateway sends the pod as the sigstore policy-controller and Kueue leave it: the run's
// image pinned with its tag dropped, a scheduling gate). The run's transport then execs into
// the pod after Kueue removes its gate (a spec update: generation 2), which the generation
// alone would have refused, and still refuses it once `kubectl set image` puts another digest
// of the run's image in. Nothing is recorded from a read of the pod: not after the status write
// of the create was lost, nor of a pod someone else planted at the run's pod name.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REASONS, RunFailure, type CodingRun, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { createKubeGateway, type KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { sandboxPodShape } from '../../operator/src/reconcile/admitted-pod.ts';
import { sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { idleAgent, type RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { SANDBOX_CONTAINER } from '../../operator/src/reconcile/sandbox-pod.ts';
import { parseSpec } from '../../operator/src/reconcile/validate-run.ts';
import { KubernetesExecTransport } from '../../operator/src/sandbox/kubernetes-exec-transport.ts';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl, registerPodExec } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';
import { reconcilerScene } from '../support/reconciler-scene.ts';

const logger = { info: () => {}, warn: () => {} };
const namespace = `admitted-record-${process.pid}`;
const runsPath = { group: 'chamvi.dev', version: 'v1alpha1', plural: 'codingruns', namespace };
const DIGEST = `sha256:${'0a'.repeat(32)}`;
/** What the sigstore policy-controller writes for acme/builder:2: Docker Hub spelled index.docker.io, the tag dropped. */
const PINNED = `index.docker.io/acme/builder@${DIGEST}`;
const KUEUE_GATE = 'kueue.x-k8s.io/admission';
const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], allowImages: ['acme/**'] }, {});

let kubeConfig: KubeConfig;
let core: CoreV1Api;
let custom: CustomObjectsApi;

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  core = kubeConfig.makeApiClient(CoreV1Api);
  custom = kubeConfig.makeApiClient(CustomObjectsApi);
  await createNamespace(namespace, { restricted: true });
  await core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name: 's', namespace }, data: { 'script.json': JSON.stringify({ turns: [{ text: 'done' }] }) } },
  });
}, 60_000);

afterAll(async () => {
  await deleteNamespace(namespace);
});

/** The pod as the policy-controller and Kueue's pod webhook leave it at admission. */
function asWebhooksAdmitIt(pod: V1Pod): V1Pod {
  const copy = structuredClone(pod);
  copy.spec!.containers.find((container) => container.name === SANDBOX_CONTAINER)!.image = PINNED;
  copy.spec!.schedulingGates = [{ name: KUEUE_GATE }];
  return copy;
}

/**
 * A reconciler for run `name` whose pod creates go through the webhooks above; the next
 * `statusWrites` status writes fail (a 500). With `pool`, its runs claim pods of that warm pool.
 * With `planted`, its first pod create finds a pod someone else made just before at the name,
 * with the run's labels and ownerReference and that image, in the reconciler's cache already.
 */
function controllerFor(name: string, failures: { statusWrites: number }, pool?: string, planted?: { image: string }) {
  const realKube = createKubeGateway(kubeConfig);
  const kube: KubeGateway = {
    ...realKube,
    async createPod(pod) {
      if (planted) {
        const copy = structuredClone(pod);
        copy.spec!.containers.find((container) => container.name === SANDBOX_CONTAINER)!.image = planted.image;
        planted = undefined;
        await core.createNamespacedPod({ namespace, body: copy });
        await scene.refresh();
      }
      return realKube.createPod(asWebhooksAdmitIt(pod));
    },
    async replaceRunStatus(run, status) {
      if (failures.statusWrites > 0 && failures.statusWrites--)
        throw Object.assign(new Error('etcdserver: request timed out'), { code: 500 });
      return realKube.replaceRunStatus(run, status);
    },
  };
  const agent: RunAgent = { ...idleAgent, inspect: async () => ({ state: 'stepping', moving: true }) };
  const scene = reconcilerScene(kubeConfig, namespace, {
    kube,
    agent,
    config: pool ? { ...config, warmPools: [{ name: pool, namespace, size: 1, image: 'acme/builder:2' }] } : config,
    events: new EventRecorder(realKube, 'admitted-pod-record', logger),
  });
  const read = async () => (await custom.getNamespacedCustomObject({ ...runsPath, name })) as CodingRun;
  return {
    read,
    fillPool: () => scene.fillPool(pool!, 1),
    stop: () => scene.reconciler.stop(),
    async pass(options: { stalePods?: boolean } = {}): Promise<boolean> {
      await scene.refresh(options);
      return scene.reconciler.reconcile(`${namespace}/${name}`).then(
        () => true,
        () => false,
      );
    },
    create: () =>
      custom.createNamespacedCustomObject({
        ...runsPath,
        body: {
          apiVersion: 'chamvi.dev/v1alpha1',
          kind: 'CodingRun',
          metadata: { name, namespace },
          spec: {
            task: 'Run.',
            repository: { url: 'https://github.com/acme/webapp.git' },
            model: { provider: 'scripted', scriptRef: { name: 's' } },
            sandbox: { image: 'acme/builder:2' },
          },
        },
      }),
  };
}

/** The run as the workers read it, parsed. */
function parsed(run: CodingRun): ParsedCodingRun {
  const spec = parseSpec(run);
  if (!spec.ok) throw new Error(`the run does not parse: ${JSON.stringify(spec)}`);
  return { ...run, spec: spec.spec };
}

/** The run's transport as the workers make it (main.ts sandboxFor), from the run as it is now. */
const runTransport = (run: ParsedCodingRun) =>
  new KubernetesExecTransport({
    kubeConfig,
    namespace,
    podName: run.status!.podName!,
    container: SANDBOX_CONTAINER,
    toolboxCommand: ['sh', '-c'],
    expectedOwnerUid: run.metadata.uid,
    expectedPodShape: sandboxPodShape(run, config),
    connectTimeoutMs: 5_000,
  });

const ungate = (podName: string) =>
  kubectl(['patch', 'pod', podName, '-n', namespace, '--type=json', '-p', '[{"op":"remove","path":"/spec/schedulingGates"}]']);

describe("the run's record of its sandbox pod as admitted (status.admittedPod)", () => {
  it('holds the pinned image the create was answered with; the pod is exec’d into once Kueue ungates it, and not once its image is set again', async () => {
    const controller = controllerFor('recorded', { statusWrites: 0 });
    await controller.create();
    const recorded = await eventually(
      async () => ((await controller.pass()) && (await controller.read()).status?.admittedPod ? controller.read() : undefined),
      60_000,
      'the record',
    );
    const podName = recorded.status!.podName!;
    const admitted = await core.readNamespacedPod({ namespace, name: podName });
    expect(recorded.status!.admittedPod).toEqual({
      uid: admitted.metadata!.uid,
      images: [
        { container: SANDBOX_CONTAINER, image: PINNED },
        { container: 'chamvi-tools', image: config.sandboxImage },
      ],
    });
    expect(admitted.metadata!.generation).toBe(1);

    const ungated = await ungate(podName);
    expect(ungated.code, ungated.stderr).toBe(0);
    const ready = await kubectl(['wait', '-n', namespace, '--for=condition=Ready', `pod/${podName}`, '--timeout=60s']);
    expect(ready.code, ready.stderr).toBe(0);
    expect((await core.readNamespacedPod({ namespace, name: podName })).metadata!.generation).toBe(2);
    const workDir = mkdtempSync(join(tmpdir(), 'admitted-record-exec-'));
    try {
      await registerPodExec({ namespace, podName, workDir });
      const run = parsed(await controller.read());
      const session = await runTransport(run).start(['true']);
      expect((await session.exited).code).toBe(0);

      const other = `index.docker.io/acme/builder@sha256:${'bb'.repeat(32)}`;
      const patched = await kubectl(['set', 'image', '-n', namespace, `pod/${podName}`, `${SANDBOX_CONTAINER}=${other}`]);
      expect(patched.code, patched.stderr).toBe(0);
      const error = await runTransport(run)
        .start(['true'])
        .catch((thrown: unknown) => thrown);
      expect(RunFailure.isInstance(error)).toBe(true);
      expect((error as RunFailure).reason).toBe(REASONS.SandboxInvalid);
      expect((error as Error).message).toContain(`image ${other} (the API server admitted ${PINNED}) in container ${SANDBOX_CONTAINER}`);
    } finally {
      controller.stop();
      rmSync(workDir, { recursive: true, force: true });
    }
  }, 120_000);

  it("holds a claimed warm pool pod's images, from the claim's answer, in the write that gives the run the pod", async () => {
    const controller = controllerFor('claimer', { statusWrites: 0 }, 'warm');
    await controller.fillPool();
    await controller.create();
    const run = await eventually(
      async () => ((await controller.pass()) && (await controller.read()).status?.phase === 'Running' ? controller.read() : undefined),
      60_000,
      'the claim',
    );
    controller.stop();
    const claimed = await core.readNamespacedPod({ namespace, name: run.status!.podName! });
    expect(claimed.metadata!.labels!['chamvi.dev/claimed-from-pool']).toBe('warm');
    expect(claimed.metadata!.generation).toBe(2);
    expect(run.status!.admittedPod).toEqual({
      uid: claimed.metadata!.uid,
      images: [...claimed.spec!.containers, ...(claimed.spec!.initContainers ?? [])].map((container) => ({
        container: container.name,
        image: container.image,
      })),
    });
  }, 120_000);

  it('is not made up from the cache after the status write of the create was lost, even while the pod is unchanged since admission', async () => {
    for (const [name, ungatedBefore] of [
      ['lost-unchanged', false],
      ['lost-ungated', true],
    ] as const) {
      const failures = { statusWrites: 1 };
      const controller = controllerFor(name, failures);
      await controller.create();
      await eventually(async () => (failures.statusWrites === 0 ? true : (await controller.pass(), undefined)), 30_000, 'the lost write');
      const podName = sandboxPodName(await controller.read());
      const made = await core.readNamespacedPod({ namespace, name: podName });
      if (ungatedBefore) expect((await ungate(podName)).code).toBe(0);
      const run = await eventually(
        async () => ((await controller.pass()) && (await controller.read()).status?.podName ? controller.read() : undefined),
        30_000,
        'the status that names the pod',
      );
      controller.stop();
      expect(made.metadata!.generation, name).toBe(1);
      expect(run.status!.podName, name).toBe(podName);
      expect(run.status!.admittedPod, name).toBeUndefined();
    }
  }, 120_000);

  it("is not written for a pod someone else planted at the run's pod name before its create (AlreadyExists), though the cache shows it owned and unchanged", async () => {
    const other = `index.docker.io/acme/builder@sha256:${'bb'.repeat(32)}`;
    const controller = controllerFor('planted', { statusWrites: 0 }, undefined, { image: other });
    await controller.create();
    const run = await eventually(
      async () => ((await controller.pass()) && (await controller.read()).status?.podName ? controller.read() : undefined),
      30_000,
      'the status that names the pod',
    );
    controller.stop();
    const pod = await core.readNamespacedPod({ namespace, name: run.status!.podName! });
    expect(pod.spec!.containers.find((container) => container.name === SANDBOX_CONTAINER)!.image).toBe(other);
    expect(pod.metadata!.generation).toBe(1);
    expect(run.status!.admittedPod).toBeUndefined();
  }, 60_000);
});
