// spec.approval.timeout: "after it the call is denied". Past the timeout the controller passed
// on both a matching answer and the timeout's deny, and whichever resume job claimed the call
// first won, so an approve written after the timeout could still run the call. Now the real
// RunReconciler remembers when it first saw an answer (ObservedRun.seenApproval) and, past the
// timeout, passes on exactly one: the human's if it saw it before, else the deny. The caches,
// the API server and the agent queue are fakes.
import { describe, expect, it, vi } from 'vitest';
import type { V1ConfigMap, V1NetworkPolicy, V1Pod } from '@kubernetes/client-node';
import type { CodingRun, ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { RunReconciler } from '../../operator/src/controller/run-reconciler.ts';
import type { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { approvalInputSha256, type ApprovalAnswer } from '../../operator/src/reconcile/approval-answer.ts';
import { idleAgent } from '../../operator/src/reconcile/run-agent.ts';
import type { RunEvent } from '../../operator/src/reconcile/decision.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { MemoryCache } from '../support/memory-run-world.ts';
import { standingSandboxPod } from '../support/standing-sandbox-pod.ts';

const KEY = 'agents/fix';
const config = loadOperatorConfig(
  { allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 2, allowUnisolatedSandboxes: true, networkPolicy: false },
  {},
);
const INPUT = '{"command":"make test"}';
const APPROVE = JSON.stringify({ id: 's1-c1', decision: 'approve', sha256: approvalInputSha256(INPUT) });
// Asked at 12:00 with approval.timeout 10m: the wait ends at 12:10.
const START = new Date('2026-11-29T12:00:00Z').getTime();

const waitingRun = (): CodingRun =>
  codingRunFixture({
    metadata: { uid: 'uid-1', resourceVersion: '1' },
    spec: { approval: { tools: ['bash'], timeout: '10m' } },
    status: {
      phase: 'WaitingForApproval',
      startTime: '2026-11-29T11:58:00Z',
      podName: 'fix-sandbox',
      conditions: [
        { type: 'Accepted', status: 'True', reason: 'Valid', message: 'ok', lastTransitionTime: '2026-11-29T11:58:00Z' },
        { type: 'SandboxReady', status: 'True', reason: 'PodReady', message: 'ok', lastTransitionTime: '2026-11-29T11:58:30Z' },
      ],
      pendingApproval: { id: 's1-c1', toolName: 'bash', input: INPUT, requestedAt: '2026-11-29T12:00:00Z' },
    } as CodingRun['status'],
  });

/** The run's sandbox pod, up and ready, at the name its status holds. */
const sandboxPod = standingSandboxPod(waitingRun() as ParsedCodingRun);

/**
 * The run waiting on approval s1-c1 (its job never runs: a busy queue), looked at every 15 s
 * from START. `queued`: what the agent's queue answers when asked whether an answer's resume
 * job is there.
 */
function scene(options: { queued?: boolean } = {}) {
  const runs = new MemoryCache<CodingRun>([waitingRun()]);
  const resumed: Array<{ at: number; answer: ApprovalAnswer }> = [];
  const asked: ApprovalAnswer[] = [];
  const events: RunEvent[] = [];
  let version = 1;
  let clock = START;
  // The next status write meets a conflict, which takes `conflictMs` (a fresh read, a retry).
  let conflictMs: number | undefined;
  let conflicts = 0;
  const kube = {
    getRun: vi.fn(async (namespace: string, name: string) => runs.get(namespace, name)),
    replaceRunStatus: vi.fn(async (run: CodingRun, status: CodingRun['status']) => {
      if (conflictMs !== undefined) {
        clock += conflictMs;
        conflictMs = undefined;
        conflicts++;
        throw Object.assign(new Error('Operation cannot be fulfilled: the object has been modified'), { code: 409 });
      }
      const stored = { ...run, metadata: { ...run.metadata, resourceVersion: String(++version) }, status };
      runs.put(stored);
      return stored;
    }),
  };
  // A leader: a reconciler with nothing in memory, over the same cluster and queue.
  const leader = () =>
    new RunReconciler({
      caches: {
        runs,
        pods: new MemoryCache<V1Pod>([sandboxPod]),
        networkPolicies: new MemoryCache<V1NetworkPolicy>(),
        configMaps: new MemoryCache(),
        finishedRuns: new MemoryCache<V1ConfigMap>(),
      },
      kube: kube as unknown as KubeGateway,
      agent: {
        ...idleAgent,
        inspect: async () => ({ state: 'waiting', moving: false }),
        resume: async (_run: CodingRun, answer: ApprovalAnswer) => void resumed.push({ at: clock, answer }),
        answerQueued: async (_run: CodingRun, answer: ApprovalAnswer) => {
          asked.push(answer);
          return options.queued ?? false;
        },
      },
      events: { record: async (_run: CodingRun, event: RunEvent) => void events.push(event) } as unknown as EventRecorder,
      config,
      logger: { info: () => {}, warn: () => {} },
      now: () => new Date(clock),
    });
  let reconciler = leader();
  /** Looks until `minutes` after START, one every 15 s. */
  const waitUntil = async (minutes: number) => {
    while (clock < START + minutes * 60_000) {
      await reconciler.reconcile(KEY);
      clock += 15_000;
    }
  };
  /** One look at `ms` after START. */
  const lookAt = async (ms: number) => {
    clock = START + ms;
    await reconciler.reconcile(KEY);
  };
  const annotate = (approval: string) => {
    const run = runs.get('agents', 'fix')!;
    runs.put({ ...run, metadata: { ...run.metadata, annotations: { 'chamvi.dev/approval': approval, 'chamvi.dev/approver': 'bob' } } });
  };
  /** The agent writes the run's status (its condition as the fixture has it): the next decision writes it back, and meets a conflict. */
  const conflictOnNextWrite = (ms: number) => {
    const run = runs.get('agents', 'fix')!;
    runs.put({ ...run, status: { ...run.status, conditions: waitingRun().status!.conditions } as CodingRun['status'] });
    conflictMs = ms;
  };
  const newLeader = () => {
    reconciler = leader();
  };
  const after = (minutes: number) => resumed.filter((each) => each.at >= START + minutes * 60_000).map((each) => each.answer);
  return { waitUntil, lookAt, annotate, conflictOnNextWrite, newLeader, after, resumed, asked, events, conflicts: () => conflicts };
}

describe('an approval answer and the approval timeout', () => {
  it('passes on only the answer it saw before the timeout, before it and after it: never the deny', async () => {
    const { waitUntil, annotate, after, resumed } = scene();
    await waitUntil(9);
    annotate(APPROVE);
    await waitUntil(12);
    expect(after(10).length).toBeGreaterThan(0);
    expect(resumed.map(({ answer }) => [answer.decision, answer.user, answer.timedOut])).toEqual(
      resumed.map(() => ['approve', 'bob', undefined]),
    );
  });

  it('denies the call, and passes on no approve, when it first sees the answer at the timeout', async () => {
    const { waitUntil, annotate, resumed } = scene();
    await waitUntil(10);
    expect(resumed).toEqual([]);
    annotate(APPROVE);
    await waitUntil(12);
    expect(resumed.length).toBeGreaterThan(0);
    expect(resumed.map(({ answer }) => [answer.decision, answer.timedOut])).toEqual(resumed.map(() => ['deny', true]));
  });

  it('passes on an answer first seen just before the timeout whose status write met a conflict, past the timeout too', async () => {
    const { waitUntil, lookAt, annotate, conflictOnNextWrite, after, resumed, conflicts } = scene();
    await waitUntil(9);
    annotate(APPROVE);
    // Seen at 12:09:59; the write conflicts, and the decision made again is at 12:10:01.
    conflictOnNextWrite(2_000);
    await lookAt(10 * 60_000 - 1_000);
    await lookAt(10 * 60_000 + 1_000);
    expect(conflicts()).toBe(1);
    expect(after(10).length).toBeGreaterThan(0);
    expect(resumed.map(({ answer }) => [answer.decision, answer.user, answer.timedOut])).toEqual(
      resumed.map(() => ['approve', 'bob', undefined]),
    );
  });

  it.each([
    { queued: true, passedOn: ['approve', undefined], warnings: 0 },
    { queued: false, passedOn: ['deny', true], warnings: 1 },
  ])(
    'after a leader change past the timeout, asks the queue once for the approve: queued $queued passes on $passedOn',
    async ({ queued, passedOn, warnings }) => {
      const { waitUntil, lookAt, annotate, newLeader, after, asked, events } = scene({ queued });
      await waitUntil(9);
      annotate(APPROVE);
      await waitUntil(9.5);
      newLeader();
      await lookAt(10 * 60_000 + 1_000);
      await waitUntil(12);
      expect(asked.map(({ id, decision }) => [id, decision])).toEqual([['s1-c1', 'approve']]);
      expect(after(10).length).toBeGreaterThan(0);
      expect(after(10).map((answer) => [answer.decision, answer.timedOut])).toEqual(after(10).map(() => passedOn));
      expect(events.filter((event) => event.reason === 'ApprovalIgnored')).toHaveLength(warnings);
    },
  );
});
