// The controller's writes meeting an API server that fails (HTTP 5xx: an admission webhook it
// calls that is down, etcd timing out), against the real API server and kwok:
//  - a new run whose pod cannot be created says so in a phase, rather than having none;
//  - a run the controller ends (here a cancel) is written terminal first, then its agent and
//    pod are stopped. When a stop fails, the reconcile is retried, and the retry decides about
//    a finished run, which has no transition left to tell: the ending's Event must not depend
//    on the stop;
//  - a run given a warm pool pod whose next status write fails is reconciled again before the
//    cache shows the claim: it must go on in that pod, not claim a second.
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUN_UID_LABEL, type CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { createKubeGateway, type KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import { idleAgent, type RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { createNamespace, deleteNamespace, kubeconfigPath } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';
import { reconcilerScene } from '../support/reconciler-scene.ts';

const logger = { info: () => {}, warn: () => {} };
const runsPath = (namespace: string) => ({ group: 'chamvi.dev', version: 'v1alpha1', plural: 'codingruns', namespace });
const runPath = (namespace: string, name: string) => ({ ...runsPath(namespace), name });

let kubeConfig: KubeConfig;
let core: CoreV1Api;
let custom: CustomObjectsApi;
const namespace = `api-faults-${process.pid}`;

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
});

afterAll(async () => {
  await deleteNamespace(namespace);
});

/** Failures to inject, counted down: the next N calls of each fail with a 500. */
interface Failures {
  createPod: number;
  deletePod: number;
  replaceRunStatus?: number;
  /** The next N pool pod claims land, and their answer is lost (a 504): outcome unknown. */
  claimAnswerLost?: number;
  /** Holds the next pod create until `release` resolves, calling `reached` as it starts. */
  holdCreatePod?: { reached: () => void; release: Promise<void> };
}

/** A reconciler over fresh caches for the run `name`, whose kube calls fail as `failures` says. */
function controllerFor(name: string, failures: Failures, warmPool?: { size: number; name?: string }) {
  const realKube = createKubeGateway(kubeConfig);
  const failing = () => Object.assign(new Error('Internal error occurred: failed calling webhook "pods.example.com"'), { code: 500 });
  const kube: KubeGateway = {
    ...realKube,
    async createPod(pod) {
      if (failures.createPod > 0 && failures.createPod--) throw failing();
      const hold = failures.holdCreatePod;
      if (hold) {
        delete failures.holdCreatePod;
        hold.reached();
        await hold.release;
      }
      return realKube.createPod(pod);
    },
    async deletePod(podNamespace, podName, uid) {
      if (failures.deletePod > 0 && failures.deletePod--) throw failing();
      return realKube.deletePod(podNamespace, podName, uid);
    },
    async replaceRunStatus(run, status) {
      if ((failures.replaceRunStatus ?? 0) > 0 && failures.replaceRunStatus!--) throw failing();
      return realKube.replaceRunStatus(run, status);
    },
  };
  // The workers hold the run (a job of it is queued); its diff is empty. The pods its agent was started on, in order.
  const startedOn: string[] = [];
  const agent: RunAgent = {
    ...idleAgent,
    inspect: async () => ({ state: 'stepping', moving: true }),
    start: async (_run, podName) => void startedOn.push(podName),
  };
  const config = loadOperatorConfig(
    {
      allowRepo: ['https://github.com/acme/*'],
      ...(warmPool ? { warmPools: [{ name: warmPool.name ?? 'pool', namespace, size: warmPool.size }] } : {}),
    },
    {},
  );
  const scene = reconcilerScene(kubeConfig, namespace, {
    kube,
    agent,
    config,
    warmGateway: (real) => ({
      ...real,
      async claimPod(podNamespace, podName, patch) {
        const claimed = await real.claimPod(podNamespace, podName, patch);
        if ((failures.claimAnswerLost ?? 0) > 0 && failures.claimAnswerLost!--)
          throw Object.assign(new Error('the server was unable to return a response in the time allotted'), { code: 504 });
        return claimed;
      },
    }),
    events: new EventRecorder(realKube, 'controller-api-faults', logger),
  });
  return {
    startedOn,
    fillPool: (ready: number) => scene.fillPool(warmPool?.name ?? 'pool', ready),
    stop: () => scene.reconciler.stop(),
    /** One reconcile, from fresh caches (the pods' as they were, with `stalePods`); whether it threw. */
    async pass(options: { stalePods?: boolean; hidePod?: string } = {}): Promise<boolean> {
      await scene.refresh(options);
      try {
        await scene.reconciler.reconcile(`${namespace}/${name}`);
        return true;
      } catch {
        return false;
      }
    },
    read: async () => (await custom.getNamespacedCustomObject(runPath(namespace, name))) as CodingRun,
    create: () =>
      custom.createNamespacedCustomObject({
        ...runsPath(namespace),
        body: {
          apiVersion: 'chamvi.dev/v1alpha1',
          kind: 'CodingRun',
          metadata: { name, namespace },
          spec: {
            task: 'Run.',
            repository: { url: 'https://github.com/acme/webapp.git' },
            model: { provider: 'scripted', scriptRef: { name: 's' } },
          },
        },
      }),
    events: async () => (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` })).items,
  };
}

describe('a new run whose pod the API server fails to create', () => {
  it('is Pending with SandboxRefused and why, and starts once creating works again', async () => {
    const failures = { createPod: 1_000, deletePod: 0 };
    const controller = controllerFor('unmade', failures);
    await controller.create();
    await controller.pass();
    const refused = (await controller.read()).status;
    expect(refused, JSON.stringify(refused)).toMatchObject({ phase: 'Pending', reason: 'SandboxRefused' });
    expect(refused!.message).toContain('(HTTP 500): Internal error occurred: failed calling webhook');
    expect((await controller.events()).map((event) => event.reason)).toContain('SandboxRefused');
    failures.createPod = 0;
    await eventually(
      async () => ((await controller.pass()) && (await controller.read()).status?.phase === 'Running' ? true : undefined),
      60_000,
      'the run to run',
    );
  }, 120_000);
});

describe('a run ended by the controller whose pod delete fails once', () => {
  it('still records the ending Event, once, and deletes the pod on the retry', async () => {
    const failures = { createPod: 0, deletePod: 0 };
    const controller = controllerFor('ended', failures);
    await controller.create();
    await eventually(
      async () => ((await controller.pass()) && (await controller.read()).status?.phase === 'Running' ? true : undefined),
      60_000,
      'the run to run',
    );
    const podName = (await controller.read()).status!.podName!;

    await custom.patchNamespacedCustomObject({
      ...runPath(namespace, 'ended'),
      body: [{ op: 'add', path: `/metadata/annotations`, value: { [CANCEL_ANNOTATION]: 'changed my mind' } }],
    });
    failures.deletePod = 1;
    // The first pass keeps the diff; the one after ends the run and meets the failing delete.
    await eventually(
      async () => ((await controller.read()).status?.phase === 'Cancelled' ? true : (await controller.pass(), undefined)),
      30_000,
      'the cancel',
    );
    expect(failures.deletePod, 'the pod delete failed once').toBe(0);
    await eventually(async () => ((await controller.pass()) ? true : undefined), 30_000, 'a reconcile that does not throw');
    // kwok removes a deleted pod at once: gone counts as deleted.
    await eventually(
      async () => {
        const pod = await core.readNamespacedPod({ namespace, name: podName }).catch(() => undefined);
        return !pod || pod.metadata?.deletionTimestamp ? true : undefined;
      },
      30_000,
      'the pod to be deleted',
    );
    const cancelled = (await controller.events()).filter((event) => event.reason === 'Cancelled');
    expect(cancelled.map((event) => event.count ?? 1)).toEqual([1]);
  }, 120_000);
});

describe('a run given a warm pool pod, whose next status write fails', () => {
  it('goes on in that pod when reconciled again before the cache shows the claim, and claims no second', async () => {
    const failures = { createPod: 0, deletePod: 0, replaceRunStatus: 0 };
    const controller = controllerFor('pooled', failures, { size: 2 });
    await controller.fillPool(2);
    await controller.create();
    // The write that records the claim (after the agent was queued) fails with a 500.
    failures.replaceRunStatus = 1;
    expect(await controller.pass(), 'the first reconcile met the failing write').toBe(false);
    expect(failures.replaceRunStatus).toBe(0);
    expect(controller.startedOn).toHaveLength(1);
    // The work queue's retry comes 200 ms later, before the watch has brought the claimed pod.
    await controller.pass({ stalePods: true });
    const run = await controller.read();
    expect(run.status, JSON.stringify(run.status)).toMatchObject({ podName: controller.startedOn[0] });
    const claimed = await core.listNamespacedPod({ namespace, labelSelector: `${RUN_UID_LABEL}=${run.metadata.uid}` });
    expect(claimed.items.map((pod) => pod.metadata!.name)).toEqual([controller.startedOn[0]]);
    expect(new Set(controller.startedOn)).toEqual(new Set([controller.startedOn[0]]));
  }, 120_000);
});

describe('a run whose pool pod claim landed but whose answer was lost', () => {
  it('takes that pod, and claims no second one when reconciled again before the cache shows the claim', async () => {
    const failures: Failures = { createPod: 0, deletePod: 0, claimAnswerLost: 1 };
    const controller = controllerFor('lostanswer', failures, { size: 3, name: 'lost' });
    await controller.fillPool(3);
    await controller.create();
    await controller.pass();
    expect(failures.claimAnswerLost).toBe(0);
    await controller.pass({ stalePods: true });
    const run = await controller.read();
    const claimed = await core.listNamespacedPod({ namespace, labelSelector: `${RUN_UID_LABEL}=${run.metadata.uid}` });
    expect(claimed.items.map((pod) => pod.metadata!.name)).toEqual([run.status?.podName]);
    expect(new Set(controller.startedOn)).toEqual(new Set([run.status?.podName]));
  }, 120_000);
});

describe('a run given a fresh pod when its pool was empty, reconciled again before the cache shows that pod', () => {
  it('goes on with its fresh pod and claims no pool pod that has become ready meanwhile', async () => {
    // A pool of its own: the pool pods the test before left ready would be claimed at once.
    const controller = controllerFor('unpooled', { createPod: 0, deletePod: 0 }, { size: 1, name: 'empty' });
    await controller.create();
    let freshName = '';
    await eventually(
      async () => {
        await controller.pass();
        const run = await controller.read();
        const pods = await core.listNamespacedPod({ namespace, labelSelector: `${RUN_UID_LABEL}=${run.metadata.uid}` });
        freshName = run.status?.podName ?? '';
        return run.status?.phase === 'Provisioning' && pods.items.some((pod) => pod.metadata!.name === freshName) ? true : undefined;
      },
      30_000,
      'the fresh pod',
    );
    await controller.fillPool(1);
    await controller.pass({ hidePod: freshName });
    const run = await controller.read();
    const pods = await core.listNamespacedPod({ namespace, labelSelector: `${RUN_UID_LABEL}=${run.metadata.uid}` });
    expect(pods.items.map((pod) => pod.metadata!.name)).toEqual([freshName]);
    expect(run.status?.podName).toBe(freshName);
    expect(controller.startedOn).toEqual([]);
  }, 120_000);
});

describe('a run deleted before the cache shows the fresh pod this process created', () => {
  it('deletes that pod before it lets the finalizer go', async () => {
    const controller = controllerFor('unseen', { createPod: 0, deletePod: 0 });
    await controller.create();
    let freshName = '';
    await eventually(
      async () => {
        await controller.pass();
        freshName = (await controller.read()).status?.podName ?? '';
        const pod = freshName ? await core.readNamespacedPod({ namespace, name: freshName }).catch(() => undefined) : undefined;
        return pod ? true : undefined;
      },
      30_000,
      'the fresh pod',
    );
    await custom.deleteNamespacedCustomObject(runPath(namespace, 'unseen'));
    await controller.pass({ hidePod: freshName });
    const pod = await core.readNamespacedPod({ namespace, name: freshName }).catch(() => undefined);
    expect(pod === undefined || pod.metadata?.deletionTimestamp !== undefined, 'the pod is deleted or being deleted').toBe(true);
    // The finalizer went only after the delete was sent: the run is gone once the pod is.
    await eventually(
      async () => ((await controller.pass()) && !(await controller.read().catch(() => undefined)) ? true : undefined),
      30_000,
      'the run to be deleted',
    );
  }, 120_000);
});

describe('a reconcile in flight when its reconciler is stopped (the leader lease lost)', () => {
  it('sends the request it was sending and writes nothing after it', async () => {
    let reached!: () => void;
    const atCreate = new Promise<void>((resolve) => (reached = resolve));
    let release!: () => void;
    const failures: Failures = {
      createPod: 0,
      deletePod: 0,
      holdCreatePod: { reached, release: new Promise((resolve) => (release = resolve)) },
    };
    const controller = controllerFor('unled', failures);
    await controller.create();
    const passing = controller.pass();
    await atCreate;
    controller.stop();
    release();
    expect(await passing, 'the stopped reconcile ends without an error').toBe(true);
    const run = await controller.read();
    // The pod create was on its way and lands; the Provisioning write after it is not sent.
    const pods = await core.listNamespacedPod({ namespace, labelSelector: `${RUN_UID_LABEL}=${run.metadata.uid}` });
    expect(pods.items).toHaveLength(1);
    expect(run.status?.phase, JSON.stringify(run.status)).toBeUndefined();
    expect((await controller.events()).map((event) => event.reason)).not.toContain('Provisioning');
  }, 120_000);
});
