// A run deleted after someone removed its finalizer (`kubectl patch --type=merge -p
// '{"metadata":{"finalizers":null}}'`, the usual fix for a "stuck" object) goes without the
// finalizer path that stops its agent. A run waiting for approval has no job that would notice:
// its state stayed in Redis (no TTL) and its bytes in its namespace's tally for good, and the
// leader kept its uid among the runs it admitted. The reconciler stops it by the uid the watch
// last saw (run-controller.ts hands the deleted object to runDeleted).
import { describe, expect, it } from 'vitest';
import { FINALIZER, REASONS, type CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { idleAgent, type RunAgent } from '../../operator/src/reconcile/run-agent.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { memoryRunWorld } from '../support/memory-run-world.ts';

const config = loadOperatorConfig(
  { allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 10, allowUnisolatedSandboxes: true, networkPolicy: false },
  {},
);
const KEY = 'agents/fix';

/** An accepted run waiting for a slot, which the first reconcile admits. */
const queued = (uid: string) =>
  codingRunFixture({
    metadata: { uid, resourceVersion: '1' },
    spec: { model: { provider: 'openai', name: 'gpt-5.6', apiKeySecretRef: { name: 'llm' } } },
    status: {
      phase: 'Pending',
      reason: REASONS.Queued,
      message: 'Queued: not looked at yet',
      conditions: [{ type: 'Accepted', status: 'True', reason: 'Valid', message: 'ok', lastTransitionTime: '2026-11-29T11:00:00Z' }],
    },
  });

/** The run as the workers leave it parked on an approval after three steps. */
const parked = (run: CodingRun): CodingRun => ({
  ...run,
  status: {
    ...run.status,
    phase: 'WaitingForApproval',
    podName: 'fix-sandbox',
    steps: 3,
    pendingApproval: { id: 's3-c1', toolName: 'bash', input: '{}', requestedAt: '2026-11-29T11:59:00Z' },
  } as CodingRun['status'],
});

/** An agent that records each stop; each answers the next of `answers` (jobs still running, or a failure), then 0. */
function recordingAgent(answers: Array<number | Error> = []) {
  const stopped: CodingRun[] = [];
  const agent: RunAgent = {
    ...idleAgent,
    async stop(run) {
      stopped.push(run);
      const answer = answers.shift() ?? 0;
      if (answer instanceof Error) throw answer;
      return answer;
    },
  };
  return { agent, stopped };
}

/** A world whose run `fix` this reconciler admitted, then parked on an approval with its finalizer removed. */
async function strippedWhileWaiting(answers: Array<number | Error> = []) {
  const { agent, stopped } = recordingAgent(answers);
  const world = memoryRunWorld({ runs: [queued('uid-1')], config, agent });
  await world.reconciler.reconcile(KEY);
  const admitted = world.runs.get('agents', 'fix')!;
  // Control: admitted by this process, which remembers it so until the cache shows it active.
  expect(admitted.status?.phase).toBe('Provisioning');
  expect(world.reconciler.admittedLocally.has('uid-1')).toBe(true);
  world.update(parked(admitted));
  world.update({ ...parked(admitted), metadata: { ...admitted.metadata, finalizers: [] } });
  return { world, stopped };
}

describe('a run deleted after its finalizer was removed', () => {
  it('stops the agent of a run waiting for approval, by the uid and steps the cache last saw, and forgets it was admitted', async () => {
    const { world, stopped } = await strippedWhileWaiting();
    world.remove('agents', 'fix');
    expect(world.reconciler.admittedLocally.has('uid-1')).toBe(false);
    expect(await world.reconciler.reconcile(KEY)).toEqual({ forget: true });
    expect(stopped.map((run) => [run.metadata.uid, run.metadata.namespace, run.metadata.name, run.status?.steps])).toEqual([
      ['uid-1', 'agents', 'fix', 3],
    ]);
    // Stopped once: a later reconcile of the name has nothing of it left to stop.
    await world.reconciler.reconcile(KEY);
    expect(stopped).toHaveLength(1);
  });

  it('looks again within a second while a job of the gone run still runs, and stops it again until none does', async () => {
    const { world, stopped } = await strippedWhileWaiting([1, 1]);
    world.remove('agents', 'fix');
    expect(await world.reconciler.reconcile(KEY)).toEqual({ requeueAfterMs: 1_000 });
    expect(await world.reconciler.reconcile(KEY)).toEqual({ requeueAfterMs: 1_000 });
    expect(await world.reconciler.reconcile(KEY)).toEqual({ forget: true });
    await world.reconciler.reconcile(KEY);
    expect(stopped.map((run) => run.metadata.uid)).toEqual(['uid-1', 'uid-1', 'uid-1']);
  });

  it('fails the reconcile when the stop fails (the queue retries it), and stops the run at the retry', async () => {
    const { world, stopped } = await strippedWhileWaiting([new Error('Redis unreachable')]);
    world.remove('agents', 'fix');
    await expect(world.reconciler.reconcile(KEY)).rejects.toThrow('Redis unreachable');
    expect(await world.reconciler.reconcile(KEY)).toEqual({ forget: true });
    expect(stopped.map((run) => run.metadata.uid)).toEqual(['uid-1', 'uid-1']);
  });

  it('stops the old run and admits the new one when the name is used again before the reconcile', async () => {
    const { world, stopped } = await strippedWhileWaiting();
    world.remove('agents', 'fix');
    world.update(queued('uid-2'));
    await world.reconciler.reconcile(KEY);
    expect(stopped.map((run) => run.metadata.uid)).toEqual(['uid-1']);
    expect(world.runs.get('agents', 'fix')?.status?.phase).toBe('Provisioning');
    expect(world.reconciler.admittedLocally.has('uid-2')).toBe(true);
  });

  it.each([
    ['after the answer to the write that removed the finalizer', false],
    ['before the answer to the write that removed the finalizer', true],
  ])(
    'stops nothing more for a run whose finalizer this process removed once its agent was stopped (the deletion seen %s)',
    async (_, deletionSeenBeforeAnswer) => {
      const { agent, stopped } = recordingAgent();
      const deleting = codingRunFixture({
        metadata: { uid: 'uid-1', resourceVersion: '1', deletionTimestamp: '2026-11-29T12:00:00Z', finalizers: [FINALIZER] },
        status: { phase: 'Succeeded', reason: 'Completed', completionTime: '2026-11-29T11:00:00Z' },
      });
      const world = memoryRunWorld({ runs: [deleting], config, agent, deletionSeenBeforeAnswer });
      await world.reconciler.reconcile(KEY);
      // Control: the finalizer path stopped it and let the finalizer go.
      expect(world.calls.get('setRunFinalizers')).toBe(1);
      expect(stopped).toHaveLength(1);
      world.remove('agents', 'fix');
      expect(world.runs.get('agents', 'fix')).toBeUndefined();
      expect(await world.reconciler.reconcile(KEY)).toEqual({ forget: true });
      expect(stopped).toHaveLength(1);
    },
  );
});
