// Delete a run's sandbox pod while the agent works: the run ends Failed/SandboxLost within
// 10 seconds and nothing the agent does afterwards changes that or leaves state behind.
//
// After each step that may have changed files the workers store the run's diff in its diff
// ConfigMap (workers/diff-snapshot.ts). A pod lost mid-step, or while a diff is being
// taken, cannot give a final diff: the run keeps that last snapshot instead, and says so
// (status.result.diffSource: snapshot). A run whose pod is still there when it ends keeps
// the diff taken from it (test/e2e/run-endings.test.ts).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl, redisUrl } from '../support/cluster.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import {
  GREET_WORLD,
  type ObjectCensus,
  READ_README,
  type RunNamespace,
  bashCall,
  codingRun,
  operatorStory,
  scriptConfigMap,
  scriptedModel,
  type RunStatus,
} from '../support/fault-fixture.ts';
import { FaultScene } from '../support/fault-scene.ts';
import { eventually, type OperatorProcess } from '../support/operator-process.ts';
import type { SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { HOLD_GIT_OBJECTS, holdGitObjects, type GitObjectsHold } from './git-objects-hold.ts';

const LOST_WITHIN_MS = 10_000;
// Long enough for the controller to end the run first, short enough to watch what the
// step does afterwards with a pod that is gone.
const HELD_REPLY_MS = 8_000;

let scene: FaultScene;
let ns: RunNamespace;
let repoUrl: string;
let census: ObjectCensus;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;
let redis: Redis;
const latencies: Record<string, number> = {};

let fake: FakeOpenAIServer;

beforeAll(async () => {
  // Started before the operator, whose allowModelEndpoints must name it (security #11.3).
  fake = await startFakeOpenAIServer();
  scene = await FaultScene.start({ namespace: 'faults-loss', census: true, env: { CHAMVI_ALLOW_MODEL_ENDPOINTS: fake.baseURL } });
  ({ ns, repoUrl, census, registrar, operator } = scene);
  redis = new Redis(redisUrl());
  await ns.apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
    stringData: { apiKey: 'sk-faults-loss' },
  });
}, 120_000);

afterAll(async () => {
  console.info(`SandboxLost latency (pod delete to Failed): ${JSON.stringify(latencies)}`);
  await scene?.stop();
  redis?.disconnect();
});

/** Deletes the run's pod and returns the status once the run has ended, with how long it took. */
async function deletePodAndWait(run: string): Promise<RunStatus> {
  const started = Date.now();
  const deleted = await kubectl(['delete', 'pod', (await ns.derivedNames(run)).pod, '-n', ns.name, '--wait=false']);
  expect(deleted.code, deleted.stderr).toBe(0);
  const status = await ns.finished(run, 60_000);
  latencies[run] = Date.now() - started;
  return status;
}

/** The run ended SandboxLost in time, keeping the snapshot stored after its step 1 (the README edit). */
async function expectLostWithSnapshot(run: string, status: RunStatus): Promise<void> {
  expect(status, operatorStory(operator)).toMatchObject({ phase: 'Failed', reason: 'SandboxLost' });
  const names = await ns.derivedNames(run);
  expect(status.message).toContain(names.pod);
  expect(latencies[run]).toBeLessThan(LOST_WITHIN_MS);
  expect(status.result).toMatchObject({ diffSource: 'snapshot', diffConfigMap: names.diff, filesChanged: 1 });
  expect(status.result!.diff).toContain('-Hello\n+Hello, world\n');
  expect(await ns.diffConfigMap(run)).toBe(status.result!.diff);
  expect(census.count('pods', names.pod), 'the operator never makes a second pod').toBe(1);
}

/** Whatever the agent still does with the lost run, its state in Redis ends up gone. */
async function expectStateGone(uid: string): Promise<void> {
  await eventually(
    async () => ((await redis.exists(`${scene.prefix}:run:${uid}`)) === 0 ? true : undefined),
    30_000,
    `the run state of ${uid} to be dropped`,
  );
}

describe('a sandbox pod deleted while the agent works', () => {
  afterAll(async () => {
    await fake?.stop();
  });

  it('ends a run in the middle of a model call as Failed/SandboxLost within 10 s, with the snapshot of step 1, and the late step changes nothing', async () => {
    fake.enqueue(
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'edit_file', arguments: GREET_WORLD.input }],
        usage: { promptTokens: 10, completionTokens: 1 },
      },
      // Step 2 is answered only after the pod is gone: it then runs its tools and saves.
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'read_file', arguments: READ_README.input }],
        usage: { promptTokens: 20, completionTokens: 2 },
        delayMs: HELD_REPLY_MS,
      },
      { type: 'text', text: 'never reached', usage: { promptTokens: 30, completionTokens: 3 } },
    );
    await ns.apply(
      codingRun('mid-step', repoUrl, {
        provider: 'openai-compatible',
        name: 'fake-coder',
        baseURL: fake.baseURL,
        apiKeySecretRef: { name: 'llm' },
      }),
    );
    await eventually(async () => (fake.requests.length >= 2 ? true : undefined), 60_000, 'step 2 to call the model');
    const uid = (await ns.run('mid-step')).metadata.uid;
    const status = await deletePodAndWait('mid-step');
    await expectLostWithSnapshot('mid-step', status);
    expect(status.steps).toBe(1);

    // The held reply arrives; the step runs its tools against a pod that is gone.
    await new Promise((resolve) => setTimeout(resolve, HELD_REPLY_MS + 2_000));
    await expectStateGone(uid);
    const after = await ns.status('mid-step');
    expect(after).toMatchObject({ phase: 'Failed', reason: 'SandboxLost', steps: 1, completionTime: status.completionTime });
    expect(fake.requests).toHaveLength(2);
  });
});

describe('a sandbox pod deleted while a diff is being taken', () => {
  // Held until the pod is gone (a take that went on would store the snapshot of step 2).
  let held: GitObjectsHold | undefined;
  afterAll(() => held?.release());

  it('ends the run as Failed/SandboxLost within 10 s with the last snapshot (the one being taken never lands)', async () => {
    // The agent's step 2 (its last tool call) makes the next git to read the workspace's objects,
    // the snapshot after that step, wait until the test lets it go (git-objects-hold.ts).
    await ns.apply(
      scriptConfigMap('finalize-script', [
        { toolCalls: [GREET_WORLD], usage: { inputTokens: 10, outputTokens: 1 } },
        { toolCalls: [bashCall(HOLD_GIT_OBJECTS)], usage: { inputTokens: 10, outputTokens: 1 } },
        { text: 'Greeted the world.', usage: { inputTokens: 10, outputTokens: 1 } },
      ]),
      codingRun('mid-finalize', repoUrl, scriptedModel('finalize-script')),
    );
    held = await holdGitObjects(
      async () => registrar.workspaceOf(ns.name, (await ns.derivedNames('mid-finalize')).pod)?.workspaceDir,
      60_000,
      'the diff to be being taken',
    );
    const uid = (await ns.run('mid-finalize')).metadata.uid;
    const status = await deletePodAndWait('mid-finalize');
    await expectLostWithSnapshot('mid-finalize', status);
    // Step 2's snapshot (then its status) never landed.
    expect(status.steps).toBe(1);
    await expectStateGone(uid);
  });
});
