// Deleting a run at any point leaves nothing behind (ARCHITECTURE "Delete", TESTING "delete a
// run in every phase"): with the workers on, a run deleted while it waits to start, while its
// setup runs, mid-step, while it waits for approval, and once it has succeeded or failed leaves
// no object it owned (pod, NetworkPolicy, ConfigMap, Secret), no key of it in Redis and no job
// of it in the queue, in any state. So does a run whose finalizer someone removed before
// deleting it (the usual fix for a "stuck" object): it goes without the operator's cleanup.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl, redisUrl } from '../support/cluster.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, runStatus } from '../support/namespaced-runs.ts';
import { type OperatorProcess, eventually } from '../support/operator-process.ts';
import type { SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { startE2eOperator } from '../support/e2e-operator.ts';

const NS = 'e2e-deletion';
const PREFIX = `deletion${Date.now()}`;

interface RunStatus {
  phase?: string;
  reason?: string;
  steps?: number;
}

let root: string;
let repoUrl: string;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;
let redis: Redis;

const EDIT = { toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } };
const statusOf = (name: string) => runStatus<RunStatus & { finalizers?: string[] }>(NS, name);

/** Where each case deletes its run, and how the test knows the run got there. */
interface DeletionCase {
  phase: string;
  turns: object[];
  spec?: object;
  /**
   * Its finalizer removed by hand first (`kubectl patch --type=merge -p
   * '{"metadata":{"finalizers":null}}'`), then deleted: the run is gone at once.
   */
  finalizerRemoved?: boolean;
  /** The run is where the case wants it (given its status). */
  reached(status: RunStatus, name: string): boolean | Promise<boolean>;
}

const cases: DeletionCase[] = [
  {
    // Just accepted: the finalizer is on, the sandbox may not exist yet.
    phase: 'Pending (just accepted)',
    turns: [{ text: 'done' }],
    reached: async (_status, name) =>
      (await kubectl(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.metadata.finalizers}'])).stdout.includes('chamvi.dev'),
  },
  {
    // Running, its prepare job busy with a setup that takes a while.
    phase: 'Running (preparing: setup in progress)',
    turns: [{ text: 'done' }],
    spec: { sandbox: { setup: 'sleep 15' } },
    reached: (status) => status.phase === 'Running',
  },
  {
    // Running, a step job busy in a tool call.
    phase: 'Running (mid-step)',
    turns: [{ toolCalls: [EDIT] }, { toolCalls: [{ toolName: 'bash', input: { command: 'sleep 15' } }] }, { text: 'done' }],
    reached: (status) => status.phase === 'Running' && (status.steps ?? 0) >= 1,
  },
  {
    phase: 'WaitingForApproval',
    turns: [{ toolCalls: [EDIT] }, { toolCalls: [{ toolName: 'bash', input: { command: 'git diff --stat' } }] }, { text: 'done' }],
    spec: { approval: { tools: ['bash'] } },
    reached: (status) => status.phase === 'WaitingForApproval',
  },
  {
    phase: 'Succeeded',
    turns: [{ toolCalls: [EDIT] }, { toolCalls: [{ toolName: 'bash', input: { command: 'git diff --stat' } }] }, { text: 'done' }],
    reached: (status) => status.phase === 'Succeeded',
  },
  {
    // Failed mid-way, after a step: its diff ConfigMap and its jobs exist.
    phase: 'Failed',
    turns: [{ toolCalls: [EDIT] }, { toolCalls: [EDIT] }, { text: 'never reached' }],
    spec: { budget: { maxSteps: 1 } },
    reached: (status) => status.phase === 'Failed',
  },
  {
    // No job of it runs that would notice it gone: its state stayed in Redis, and its bytes in
    // the namespace's tally, for good.
    phase: 'WaitingForApproval, its finalizer removed before the deletion',
    turns: [{ toolCalls: [EDIT] }, { toolCalls: [{ toolName: 'bash', input: { command: 'git diff --stat' } }] }, { text: 'done' }],
    spec: { approval: { tools: ['bash'] } },
    finalizerRemoved: true,
    reached: (status) => status.phase === 'WaitingForApproval',
  },
];

/** Objects in the namespace that name the run (by uid) as an owner. */
async function ownedObjects(uid: string): Promise<string[]> {
  const listed = await kubectl(['get', 'pods,networkpolicies,configmaps,secrets', '-n', NS, '-o', 'json']);
  const items = (
    JSON.parse(listed.stdout) as { items: Array<{ kind: string; metadata: { name: string; ownerReferences?: Array<{ uid: string }> } }> }
  ).items;
  return items
    .filter((item) => item.metadata.ownerReferences?.some((owner) => owner.uid === uid))
    .map((item) => `${item.kind}/${item.metadata.name}`);
}

/** Every Redis key of this operator's prefix that names the run, or holds its job ids (queues by state). */
async function redisTraces(uid: string): Promise<string[]> {
  const found: string[] = [];
  for (const key of await redis.keys(`${PREFIX}:*`)) {
    if (key.includes(uid)) {
      found.push(key);
      continue;
    }
    const type = await redis.type(key);
    const members =
      type === 'list'
        ? await redis.lrange(key, 0, -1)
        : type === 'zset'
          ? await redis.zrange(key, '0', '-1')
          : type === 'set'
            ? await redis.smembers(key)
            : [];
    // A hash's fields: a namespace's tally of saved-state bytes is one field a run.
    const fields = type === 'hash' ? await redis.hkeys(key) : [];
    // BullMQ's events stream is a bounded log of what happened, not a job or state of the run.
    for (const member of [...members, ...fields]) if (member.includes(uid)) found.push(`${key} holds ${member}`);
  }
  return found;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-deletion-'));
  repoUrl = createBareRepository(root, { 'README.md': 'Hello\n\nA small example repository.\n' });
  redis = new Redis(redisUrl());
  ({ operator, registrar } = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-deletion',
    redisPrefix: PREFIX,
    allowRepo: `file://${join(root, 'git')}/*`,
  }));
}, 120_000);

afterAll(async () => {
  await operator?.kill();
  await registrar?.stop();
  redis?.disconnect();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('deleting a run, with the workers on', () => {
  it.each(cases.map((each, index) => ({ ...each, name: `delete-${index}` })))(
    'in $phase leaves no object, no Redis key and no job of it',
    async ({ name, turns, spec, finalizerRemoved, reached }) => {
      await applyIn(NS, [
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-script` }, data: { 'script.json': JSON.stringify({ turns }) } },
        {
          apiVersion: 'chamvi.dev/v1alpha1',
          kind: 'CodingRun',
          metadata: { name },
          spec: {
            task: 'Greet the world.',
            repository: { url: repoUrl },
            model: { provider: 'scripted', scriptRef: { name: `${name}-script` } },
            ...spec,
          },
        },
      ]);
      const uid = (await kubectl(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
      await eventually(
        async () => ((await reached(await statusOf(name), name)) ? true : undefined),
        90_000,
        `${name} to reach the phase`,
      ).catch(async (error: unknown) => {
        // What a reader of a failed CI run needs, in the message its tail shows: where the run
        // stood, and what the operator last said of it.
        const { phase, reason, steps, message } = (await statusOf(name)) as RunStatus & { message?: string };
        const said = operator.lines.filter((line) => line.uid === uid || line.name === name).slice(-4);
        throw new Error(
          `${String(error)}; status ${JSON.stringify({ phase, reason, steps, message })}; operator: ${said.map((line) => line.msg).join(' | ')}`,
        );
      });
      // Control: the run had left traces to clean up (owned objects or Redis keys), except
      // when deleted so early that it had none yet.
      const before = [...(await ownedObjects(uid)), ...(await redisTraces(uid))];
      if (name !== 'delete-0') expect(before, 'traces before the deletion').not.toEqual([]);
      // Control: the run's state, and its bytes in the namespace's tally, were there to clean up.
      if (finalizerRemoved)
        expect(before).toEqual(expect.arrayContaining([`${PREFIX}:run:${uid}`, `${PREFIX}:state-bytes:${NS} holds ${uid}`]));

      const deletion = ['delete', 'crun', name, '-n', NS, '--wait=false'];
      if (finalizerRemoved) {
        // The operator is frozen between the two commands: it puts the finalizer back on any
        // look at a live run without it, and the deletion would then go its usual way.
        process.kill(operator.pid, 'SIGSTOP');
        try {
          expect((await kubectl(['patch', 'crun', name, '-n', NS, '--type=merge', '-p', '{"metadata":{"finalizers":null}}'])).code).toBe(0);
          expect((await kubectl(deletion)).code).toBe(0);
        } finally {
          process.kill(operator.pid, 'SIGCONT');
        }
      } else expect((await kubectl(deletion)).code).toBe(0);
      await eventually(
        async () => ((await kubectl(['get', 'crun', name, '-n', NS, '-o', 'name'])).code !== 0 ? true : undefined),
        60_000,
        `${name} to be gone`,
      );
      // A job that was busy when the run went finishes on its own (the run is gone when it next
      // looks); nothing of the run may be left once it has.
      const left = await eventually(
        async () => {
          const traces = [...(await ownedObjects(uid)), ...(await redisTraces(uid))];
          return traces.length === 0 ? traces : undefined;
        },
        45_000,
        `${name} to leave nothing`,
      ).catch(async () => [...(await ownedObjects(uid)), ...(await redisTraces(uid))]);
      expect(left).toEqual([]);
    },
    180_000,
  );
});
