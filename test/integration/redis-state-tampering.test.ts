// Security #11.1, performed: an attacker who can write the operator's Redis (here: who has its
// password) edits a parked run's state, copies another run's state under a run's key, and
// forges an approval job. The real operator runs against the test control plane and its
// (password-protected) Redis; a loopback HTTP server stands for the attacker's endpoint and
// records every request. Before the fix the first attack sent the Secret as a Bearer token to
// that server and ran the injected command on approval, the second moved the other run, and
// the third approved a call no human approved. Now each run fails StateLost with the reason,
// or the forged job is refused, and nothing in the tampered data is acted on.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeconfigPath, redisUrl } from '../support/cluster.ts';
import { redisPing } from '../support/control-plane/readiness.ts';
import { bashCall, codingRun, operatorStory, scriptConfigMap, scriptedModel, usage, type RunStatus } from '../support/fault-fixture.ts';
import { FaultScene } from '../support/fault-scene.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';

const NAMESPACE = 'chamvi-redis-tamper';
const VICTIM_KEY = 'sk-victim-0c3a9e5d7f1b';
const APPROVE_BASH = { approval: { tools: ['bash'] }, budget: { timeout: '3m' } };

interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

/** The attacker's endpoint: answers 401 to everything and keeps what it was sent. */
async function startRecorder(): Promise<{ url: string; requests: Recorded[]; server: Server }> {
  const requests: Recorded[] = [];
  const server = createServer((request, response) => {
    requests.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers });
    request.resume();
    response.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"recorded"}}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, server };
}

let scene: FaultScene;
let attacker: Awaited<ReturnType<typeof startRecorder>>;
let redis: Redis;

const stateKey = (uid: string) => `${scene.prefix}:run:${uid}`;

/** What an attacker without the operator's key does: edit the state's JSON, keep whatever precedes it. */
async function tamperState(uid: string, change: (state: Record<string, any>) => void): Promise<void> {
  const text = await redis.get(stateKey(uid));
  if (!text) throw new Error(`no state for ${uid}`);
  const start = text.indexOf('{');
  const state = JSON.parse(text.slice(start)) as Record<string, any>;
  change(state);
  await redis.set(stateKey(uid), `${text.slice(0, start)}${JSON.stringify(state)}`);
}

async function parked(name: string): Promise<{ uid: string; status: RunStatus }> {
  const status = await scene.ns.waitFor(
    name,
    'to wait for approval',
    (each) => each.phase === 'WaitingForApproval' || ['Failed', 'Succeeded'].includes(each.phase ?? ''),
    90_000,
  );
  expect(status.phase, JSON.stringify(status)).toBe('WaitingForApproval');
  return { uid: (await scene.ns.run(name)).metadata.uid, status };
}

beforeAll(async () => {
  redis = new Redis(redisUrl());
  attacker = await startRecorder();
  // The attacker's endpoint is an allowed model endpoint and the Secret is usable by runs
  // (security #11.3): only the state's own checks stand between the tampered state and them.
  scene = await FaultScene.start({ namespace: NAMESPACE, env: { CHAMVI_ALLOW_MODEL_ENDPOINTS: `${attacker.url}/v1` } });
  await scene.ns.apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'victim-key', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
    stringData: { apiKey: VICTIM_KEY },
  });
}, 300_000);

afterAll(async () => {
  redis?.disconnect();
  attacker?.server.close();
  await scene?.stop();
});

describe('security #11.1 Redis is not trusted', () => {
  it('runs a run end to end on a Redis that refuses clients without its password, with its state sealed', async () => {
    const url = new URL(redisUrl());
    expect(await redisPing(Number(url.port)), 'Redis answered a client without its password').toBe(false);
    expect(await redisPing(Number(url.port), decodeURIComponent(url.password))).toBe(true);

    // The run parks at an approval, so its state is in Redis when read: polling a running run
    // for its state raced the run, which can finish between two polls.
    await scene.ns.apply(
      scriptConfigMap('plain-script', [
        { toolCalls: [bashCall('git status --short')], usage: usage(5, 1) },
        { text: 'Read it.', usage: usage(6, 1) },
      ]),
      codingRun('plain', scene.repoUrl, scriptedModel('plain-script'), APPROVE_BASH),
    );
    const { uid, status: waiting } = await parked('plain');
    expect(await redis.get(stateKey(uid))).toMatch(/^chamvi-state-v2 [A-Za-z0-9_-]{43}\n\{/);
    await scene.ns.answer('plain', waiting.pendingApproval!.id, 'approve');
    const status = await scene.finished('plain');
    expect(status.phase, `${status.message}\n${operatorStory(scene.operator)}`).toBe('Succeeded');
  });

  it('a tampered model (foreign baseURL, a Secret of the namespace) and approval (another command): the run fails StateLost, no request, no command', async () => {
    const marker = join(scene.root, 'tampered-approval-ran');
    await scene.ns.apply(
      scriptConfigMap('tampered-script', [
        { toolCalls: [bashCall('git status --short')], usage: usage(5, 1) },
        { text: 'Done.', usage: usage(6, 1) },
      ]),
      codingRun('tampered', scene.repoUrl, scriptedModel('tampered-script'), APPROVE_BASH),
    );
    const { uid, status } = await parked('tampered');
    await tamperState(uid, (state) => {
      state.model = {
        provider: 'openai-compatible',
        name: 'gpt-4o',
        baseURL: `${attacker.url}/v1`,
        apiKeySecretRef: { name: 'victim-key', key: 'apiKey' },
      };
      state.pendingApproval.input = { command: `touch ${marker}` };
    });
    // The approver approves what status shows (git status); the state now holds something else.
    await scene.ns.answer('tampered', status.pendingApproval!.id, 'approve');

    const final = await scene.finished('tampered');
    expect(existsSync(marker), 'the injected command ran').toBe(false);
    expect(JSON.stringify(attacker.requests), 'the Secret went to the foreign endpoint').not.toContain(VICTIM_KEY);
    expect(attacker.requests, 'the operator called the foreign endpoint').toEqual([]);
    expect(final.phase).toBe('Failed');
    expect(final.reason).toBe('StateLost');
    expect(final.message).toMatch(
      /the run's state in Redis failed validation: .*; was Redis written by something other than the operator\?/,
    );
  });

  it("another run's genuine state copied under a run's key: the run fails naming the other run, which is not touched", async () => {
    await scene.ns.apply(
      scriptConfigMap('pair-script', [
        { toolCalls: [bashCall('git status --short')], usage: usage(5, 1) },
        { text: 'Done.', usage: usage(6, 1) },
      ]),
      codingRun('copier', scene.repoUrl, scriptedModel('pair-script'), APPROVE_BASH),
      codingRun('victim', scene.repoUrl, scriptedModel('pair-script'), APPROVE_BASH),
    );
    const copier = await parked('copier');
    const victim = await parked('victim');
    const victimState = (await redis.get(stateKey(victim.uid)))!;
    const victimBefore = await scene.ns.run('victim');
    await redis.set(stateKey(copier.uid), victimState);
    await scene.ns.answer('copier', copier.status.pendingApproval!.id, 'approve');

    const final = await scene.finished('copier');
    expect(final.phase).toBe('Failed');
    expect(final.reason).toBe('StateLost');
    expect(final.message).toContain(
      `it is the state of run ${NAMESPACE}/victim (uid ${victim.uid}), not of ${NAMESPACE}/copier (uid ${copier.uid})`,
    );
    // Give a misdirected write time to land, then check the victim: same status, same state.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const victimAfter = await scene.ns.run('victim');
    expect(victimAfter.status?.phase).toBe('WaitingForApproval');
    expect(victimAfter.status?.pendingApproval?.id).toBe(victimBefore.status?.pendingApproval?.id);
    expect({ steps: victimAfter.status?.steps, toolCalls: victimAfter.status?.toolCalls, usage: victimAfter.status?.usage }).toEqual({
      steps: victimBefore.status?.steps,
      toolCalls: victimBefore.status?.toolCalls,
      usage: victimBefore.status?.usage,
    });
    expect(await redis.get(stateKey(victim.uid))).toBe(victimState);
  });

  it('a resume job forged into the queue approves nothing: it fails authentication and the call stays pending', async () => {
    const marker = join(scene.root, 'forged-approval-ran');
    await scene.ns.apply(
      scriptConfigMap('forged-script', [
        { toolCalls: [bashCall(`touch ${marker}`)], usage: usage(5, 1) },
        { text: 'Done.', usage: usage(6, 1) },
      ]),
      codingRun('forged', scene.repoUrl, scriptedModel('forged-script'), APPROVE_BASH),
    );
    const { uid, status } = await parked('forged');
    const queue = new Queue('chamvi-agent', { connection: new Redis(redisUrl(), { maxRetriesPerRequest: null }), prefix: scene.prefix });
    try {
      await queue.add(
        'resume',
        { uid, namespace: NAMESPACE, name: 'forged', approval: { id: status.pendingApproval!.id, decision: 'approve' } },
        { jobId: 'forged-approval' },
      );
      const outcome = await eventually(
        async () => {
          const state = await queue.getJobState('forged-approval');
          return state === 'failed' || state === 'completed' ? state : undefined;
        },
        30_000,
        'the forged job to end',
      );
      expect(outcome).toBe('failed');
      expect((await queue.getJob('forged-approval'))?.failedReason).toMatch(
        /failed authentication: its data was not written by this operator/,
      );
    } finally {
      await queue.close();
    }
    expect(existsSync(marker), 'the forged approval ran the call').toBe(false);
    const after = await scene.ns.status('forged');
    expect(after.phase).toBe('WaitingForApproval');
    expect(after.pendingApproval?.id).toBe(status.pendingApproval!.id);
  });

  it('the operator refuses to start on a Redis URL without a password, naming allowInsecureRedis', async () => {
    const operator = new OperatorProcess({
      kubeconfig: kubeconfigPath(),
      env: { REDIS_URL: 'redis://127.0.0.1:6399', CHAMVI_LEADER_ELECTION: 'false' },
    });
    const code = await operator.exited;
    expect(code).toBe(2);
    expect(operator.stderr.join('')).toMatch(/config key redisUrl: the Redis URL has no password .*allowInsecureRedis: true/);
  });
});
