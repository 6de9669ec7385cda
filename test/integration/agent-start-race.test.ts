// The write that starts a run's agent, lost to a conflict, against the real API server and kwok.
// The controller queues the agent first and writes Running after (a crash between leaves a job,
// not a Running run without one). When another writer keeps its writes conflicting, the agent
// runs on, and a worker's step writes Running before the controller's write lands. The
// controller then decides again from a run already Running, past the phases whose writes
// record that it was accepted, which pod it runs in and that the pod was ready. Those must be
// recorded anyway, and a run given a warm pool pod must go on in it, not fail as SandboxLost.
// (The faults tier's status-conflicts test met this by chance, about once in 20 CI runs.)
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONDITION_REASONS, type CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig, type OperatorConfig } from '../../operator/src/config/operator-config.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { createKubeGateway, type KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { findCondition } from '../../operator/src/reconcile/conditions.ts';
import { idleAgent, type RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { runningAfterStepStatus } from '../../operator/src/reconcile/run-status-transitions.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { createNamespace, deleteNamespace, kubeconfigPath } from '../support/cluster.ts';
import { eventually } from '../support/operator-process.ts';
import { reconcilerScene } from '../support/reconciler-scene.ts';

const logger = { info: () => {}, warn: () => {} };
const OTHER_CONDITION = 'test.chamvi.dev/Other';
const runsPath = (namespace: string) => ({ group: 'chamvi.dev', version: 'v1alpha1', plural: 'codingruns', namespace });
const runPath = (namespace: string, name: string) => ({ ...runsPath(namespace), name });

let kubeConfig: KubeConfig;
let core: CoreV1Api;
let custom: CustomObjectsApi;
const namespaces: string[] = [];

beforeAll(() => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  core = kubeConfig.makeApiClient(CoreV1Api);
  custom = kubeConfig.makeApiClient(CustomObjectsApi);
});

afterAll(async () => {
  await Promise.all(namespaces.map((namespace) => deleteNamespace(namespace)));
});

/** Another controller keeping a condition of its own: read, change, replace with the resourceVersion. */
async function otherWriterTouches(namespace: string, name: string): Promise<void> {
  const run = (await custom.getNamespacedCustomObject(runPath(namespace, name))) as CodingRun;
  const conditions = (run.status?.conditions ?? []).filter((condition) => condition.type !== OTHER_CONDITION);
  conditions.push({
    type: OTHER_CONDITION,
    status: 'True',
    reason: 'Touched',
    message: 'x',
    lastTransitionTime: new Date().toISOString(),
  } as never);
  await custom.replaceNamespacedCustomObjectStatus({
    ...runPath(namespace, name),
    body: { ...run, status: { ...run.status, conditions } },
  });
}

/**
 * Reconciles the run until its agent was started and the controller's writes are done. Until
 * the worker has written, every status write of the controller meets a conflict (the other
 * writer writes just before it); the agent's start makes the worker's first write, as a step's
 * end does. `outlast`: the conflicts go on to the end of that reconcile (its retries run out),
 * so the controller writes after the worker only in the next one, from its caches alone.
 */
/** The run as the API server holds it at the end, and the pod its agent was started on. */
type Raced = CodingRun & { startedOn?: string };

async function raceToTheAgent(namespace: string, config: OperatorConfig, warm: boolean, outlast: boolean): Promise<Raced> {
  const realKube = createKubeGateway(kubeConfig);
  let workerWrote = false;
  let passes = 0;
  let workerWroteInPass = 0;
  let startedOn: string | undefined;
  const kube: KubeGateway = {
    ...realKube,
    async replaceRunStatus(run, status) {
      if (!workerWrote || (outlast && passes === workerWroteInPass)) await otherWriterTouches(namespace, run.metadata.name);
      return realKube.replaceRunStatus(run, status);
    },
  };
  const agent: RunAgent = {
    ...idleAgent,
    async start(run, podName) {
      startedOn = podName;
      const written = await new RunStatusWriter(realKube).write(namespace, run.metadata.name, run.metadata.uid, (status) =>
        runningAfterStepStatus(
          status,
          {
            steps: 1,
            toolCalls: 1,
            usage: { inputTokens: 10, outputTokens: 1, cacheReadTokens: 0, reasoningTokens: 0, totalTokens: 11, complete: true },
          },
          run.metadata.generation ?? 0,
          new Date(),
        ),
      );
      workerWrote = written.written;
      workerWroteInPass = passes;
    },
    // The workers hold the run (a job of it is queued): nothing is lost.
    async inspect() {
      return { state: 'stepping', moving: true };
    },
  };
  const scene = reconcilerScene(kubeConfig, namespace, {
    kube,
    agent,
    config,
    events: new EventRecorder(realKube, 'agent-start-race', logger),
  });
  if (warm) await scene.fillPool('pool', 1);
  await custom.createNamespacedCustomObject({
    ...runsPath(namespace),
    body: {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'raced', namespace },
      spec: {
        task: 'Race.',
        repository: { url: 'https://github.com/acme/webapp.git' },
        model: { provider: 'scripted', scriptRef: { name: 's' } },
      },
    },
  });
  // Until the worker has written and one decision after it has landed (or the run has ended).
  let settled = 0;
  return eventually<Raced>(
    async () => {
      await scene.refresh();
      passes++;
      try {
        await scene.reconciler.reconcile(`${namespace}/raced`);
      } catch {
        return undefined; // conflicts beyond the reconciler's retries: the work queue's backoff, here the next pass
      }
      const run = (await custom.getNamespacedCustomObject(runPath(namespace, 'raced'))) as CodingRun;
      if (run.status?.phase === 'Failed') return run;
      if (workerWrote) settled++;
      return settled >= 2 ? { ...run, startedOn } : undefined;
    },
    60_000,
    'the agent to start and the controller to write after the worker',
  );
}

async function sceneNamespace(name: string): Promise<string> {
  const namespace = `${name}-${process.pid}`;
  namespaces.push(namespace);
  await createNamespace(namespace, { restricted: true });
  await core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name: 's', namespace }, data: { 'script.json': JSON.stringify({ turns: [{ text: 'done' }] }) } },
  });
  return namespace;
}

/** Whether the controller writes after the worker in the reconcile that started the agent, or only in the next. */
const WHEN = [
  { when: 'in the same reconcile', outlast: false, suffix: 'same' },
  { when: 'in the next reconcile', outlast: true, suffix: 'next' },
];

describe.each(WHEN)("a worker's Running write that lands first, the controller writing after it $when", ({ outlast, suffix }) => {
  it('still records the run as accepted, in its pod, and that pod as ready', async () => {
    const namespace = await sceneNamespace(`start-race-${suffix}`);
    const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'] }, {});
    const run = await raceToTheAgent(namespace, config, false, outlast);
    const status = run.status!;
    expect(status, JSON.stringify(status)).toMatchObject({ phase: 'Running', steps: 1, podName: run.startedOn });
    expect(findCondition(status.conditions, 'Accepted'), JSON.stringify(status.conditions)).toMatchObject({
      status: 'True',
      reason: 'Valid',
    });
    expect(findCondition(status.conditions, 'SandboxReady')).toMatchObject({ status: 'True', reason: CONDITION_REASONS.PodReady });
    // The other writer's condition was never lost either.
    expect(findCondition(status.conditions, OTHER_CONDITION as never)?.status).toBe('True');
  }, 90_000);

  it('keeps a run given a warm pool pod in that pod, rather than failing it as SandboxLost', async () => {
    const namespace = await sceneNamespace(`start-race-warm-${suffix}`);
    const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], warmPools: [{ name: 'pool', namespace, size: 1 }] }, {});
    const run = await raceToTheAgent(namespace, config, true, outlast);
    const status = run.status!;
    expect(status, JSON.stringify(status)).toMatchObject({ phase: 'Running', steps: 1, podName: run.startedOn });
    expect(run.startedOn, 'the agent was started on a pool pod').toMatch(/^pool-warm-/);
    expect(findCondition(status.conditions, 'Accepted')).toMatchObject({ status: 'True' });
    expect(findCondition(status.conditions, 'SandboxReady')).toMatchObject({ status: 'True', reason: CONDITION_REASONS.WarmPodClaimed });
  }, 120_000);
});
