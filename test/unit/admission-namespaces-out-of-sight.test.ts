// Admission with a watched namespace the leader cannot see: one set aside at the term's start (its
// lists refused: a tenant deleted the operator's RoleBinding there), or one whose settings it can
// no longer read (the RoleBinding deleted while it leads). The other namespaces' runs must still
// be admitted, and the slots must not go to runs that cannot use them
// (controller/run-reconciler.ts, reconcile/admission.ts inPlanScope).
import { describe, expect, it } from 'vitest';
import { REASONS, type CodingRun, type Phase } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { AdmissionPlanCache, FAIR_SHARE_TTL_MS } from '../../operator/src/controller/admission-plan-cache.ts';
import type { FairShareSources } from '../../operator/src/controller/run-reconciler.ts';
import { readNamespacePolicy } from '../../operator/src/reconcile/namespace-policy.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { memoryRunWorld } from '../support/memory-run-world.ts';

const configWith = (maxActiveRuns: number) =>
  loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], maxActiveRuns, allowUnisolatedSandboxes: true, networkPolicy: false }, {});
const accepted = [
  { type: 'Accepted' as const, status: 'True' as const, reason: 'Valid', message: 'ok', lastTransitionTime: '2026-11-29T11:00:00Z' },
];

function run(namespace: string, index: number, phase: Phase, sequence?: number): CodingRun {
  return codingRunFixture({
    metadata: {
      namespace,
      name: `r${index}`,
      uid: `${namespace}-${index}`,
      creationTimestamp: new Date(Date.parse('2026-11-29T10:00:00Z') + index * 1000).toISOString(),
    },
    spec: { model: { provider: 'openai', name: 'gpt-5.6', apiKeySecretRef: { name: 'llm' } } },
    status: {
      phase,
      conditions: accepted,
      ...(phase === 'Pending' ? { reason: REASONS.Queued, message: 'Queued: not looked at yet' } : {}),
      ...(sequence !== undefined ? { admission: { sequence, time: '2026-11-29T11:00:00Z' } } : {}),
    },
  });
}

/** Policies read from no annotations, but a namespace in `refused` answers 403 as the API server does without the RoleBinding. */
function fairShare(refused: Set<string>): FairShareSources & { reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    policyOf: async (namespace) => {
      reads.push(namespace);
      if (refused.has(namespace)) throw Object.assign(new Error(`namespaces "${namespace}" is forbidden`), { code: 403 });
      return readNamespacePolicy({});
    },
    tokensOn: async () => 0,
  };
}

const phaseOf = (world: ReturnType<typeof memoryRunWorld>, key: string) => {
  const [namespace, name] = key.split('/') as [string, string];
  return world.runs.get(namespace, name)?.status?.phase;
};

describe('admission with a namespace the leader cannot see', () => {
  it("admits a run though another namespace's settings answer 403, says so once, and fails only that namespace's own runs", async () => {
    let now = 0;
    const refused = new Set(['team-b']);
    const sources = fairShare(refused);
    const warnings: Array<{ fields: object; message: string }> = [];
    const world = memoryRunWorld({
      runs: [run('team-b', 1, 'Pending'), ...[2, 3, 4].map((index) => run('team-a', index, 'Pending'))],
      config: configWith(10),
      admissionPlans: new AdmissionPlanCache({ changesReported: true, clock: () => now }),
      fairShare: sources,
      logger: { info: () => {}, warn: (fields, message) => warnings.push({ fields, message }) },
    });
    await world.reconciler.reconcile('team-a/r2');
    expect(phaseOf(world, 'team-a/r2')).toBe('Provisioning');
    // Not granted the slot a plan could give it: its caps and budget are unknown.
    expect(world.reconciler.admittedLocally.has('team-b-1')).toBe(false);
    await world.reconciler.reconcile('team-a/r3');
    expect(phaseOf(world, 'team-a/r3')).toBe('Provisioning');
    expect(
      sources.reads.filter((namespace) => namespace === 'team-b'),
      'asked again only once the view expires',
    ).toHaveLength(1);
    now += FAIR_SHARE_TTL_MS;
    await world.reconciler.reconcile('team-a/r4');
    expect(phaseOf(world, 'team-a/r4')).toBe('Provisioning');
    expect(sources.reads.filter((namespace) => namespace === 'team-b')).toHaveLength(2);
    expect(warnings.filter((line) => (line.fields as { namespace?: string }).namespace === 'team-b')).toEqual([
      { fields: expect.objectContaining({ namespace: 'team-b', code: 403 }), message: expect.stringContaining('RoleBinding') },
    ]);
    // Its own run cannot be decided without its settings: the reconcile fails and is retried.
    await expect(world.reconciler.reconcile('team-b/r1')).rejects.toThrow('forbidden');
    expect(phaseOf(world, 'team-b/r1')).toBe('Pending');
  });

  it('keeps a slot granted to a run of a namespace whose settings became unreadable, so no run is admitted past maxActiveRuns', async () => {
    let now = 0;
    const refused = new Set<string>();
    // team-a's turn has passed (it was admitted last): team-b's run is served first.
    const runs = [run('team-a', 0, 'Succeeded', 1), run('team-b', 1, 'Pending'), run('team-a', 2, 'Pending')];
    const world = memoryRunWorld({
      runs,
      config: configWith(1),
      admissionPlans: new AdmissionPlanCache({ changesReported: true, clock: () => now }),
      fairShare: fairShare(refused),
    });
    await world.reconciler.reconcile('team-a/r2');
    expect(world.reconciler.admittedLocally.has('team-b-1'), "team-b's turn: granted the one slot").toBe(true);
    expect(phaseOf(world, 'team-a/r2')).toBe('Pending');
    // The settings cannot be read: whether team-b's run took its slot is not known from here.
    refused.add('team-b');
    now += FAIR_SHARE_TTL_MS;
    await world.reconciler.reconcile('team-a/r2');
    expect(phaseOf(world, 'team-a/r2')).toBe('Pending');
    expect(world.reconciler.admittedLocally.has('team-b-1')).toBe(true);
    // Restored: team-b's run takes the slot it was granted, and team-a's run still waits for one.
    refused.delete('team-b');
    now += FAIR_SHARE_TTL_MS;
    await world.reconciler.reconcile('team-b/r1');
    expect(phaseOf(world, 'team-b/r1')).toBe('Provisioning');
    await world.reconciler.reconcile('team-a/r2');
    expect(phaseOf(world, 'team-a/r2')).toBe('Pending');
  });

  it('keeps the slot of a run it just admitted when its namespace answers 5xx before the watch shows it', async () => {
    let now = 0;
    let failNext = false;
    const sources: FairShareSources = {
      policyOf: async (namespace) => {
        if (namespace === 'team-a' && failNext) {
          failNext = false;
          throw Object.assign(new Error('the server is currently unable to handle the request'), { statusCode: 503 });
        }
        return readNamespacePolicy({});
      },
      tokensOn: async () => 0,
    };
    // team-a's run is admitted: its status write is sent, but the cache still shows it Pending.
    const world = memoryRunWorld({
      runs: [run('team-a', 1, 'Pending'), run('team-b', 2, 'Pending')],
      config: configWith(1),
      admissionPlans: new AdmissionPlanCache({ changesReported: true, clock: () => now }),
      fairShare: sources,
      writesNotSeen: new Set(['team-a/r1']),
    });
    await world.reconciler.reconcile('team-a/r1');
    expect(world.calls.get('replaceRunStatus')).toBe(1);
    expect(phaseOf(world, 'team-a/r1')).toBe('Pending');
    failNext = true;
    now += FAIR_SHARE_TTL_MS;
    await world.reconciler.reconcile('team-b/r2');
    expect(failNext, "team-a's settings asked for, and answered 503").toBe(false);
    expect(phaseOf(world, 'team-b/r2'), 'one sandbox at maxActiveRuns 1').toBe('Pending');
    expect(world.reconciler.admittedLocally.has('team-a-1')).toBe(true);
    expect(world.runs.get('team-b', 'r2')?.status?.message).toContain('maxActiveRuns');
  });

  it('admits the runs of listed namespaces round after round while a namespace set aside has waiting runs in the cache', async () => {
    // team-b's CodingRun list worked and another of its lists was refused: its runs are cached, its keys held.
    const runs = [
      ...[1, 2, 3, 4, 5].map((index) => run('team-b', index, 'Pending')),
      ...[11, 12, 13, 14, 15, 16].map((index) => run('team-a', index, 'Pending')),
    ];
    const world = memoryRunWorld({
      runs,
      config: configWith(2),
      admissionPlans: new AdmissionPlanCache({ changesReported: true }),
      listed: (namespace) => namespace !== 'team-b',
    });
    const teamA = (phase: Phase) =>
      world.runs.list().filter((each) => each.metadata.namespace === 'team-a' && each.status?.phase === phase);
    for (let round = 0; round < 3; round++) {
      for (const waiting of teamA('Pending')) await world.reconciler.reconcile(`team-a/${waiting.metadata.name}`);
      const admitted = teamA('Provisioning');
      expect(
        admitted.map((each) => each.metadata.name),
        `round ${round}`,
      ).toHaveLength(2);
      // They end, and their pods are gone: their slots free.
      for (const each of admitted) world.update({ ...each, status: { ...each.status, phase: 'Succeeded', reason: 'Completed' } });
    }
    expect(teamA('Succeeded')).toHaveLength(6);
    expect([...world.reconciler.admittedLocally].filter((uid) => uid.startsWith('team-b'))).toEqual([]);
  });

  it('plans the runs of a namespace set aside once it has listed, and wakes no queue head of it before', async () => {
    let teamBListed = false;
    const plans = new AdmissionPlanCache({ changesReported: true });
    const woken: string[] = [];
    // The one slot is taken; team-a was served last, so team-b's run is next once it counts.
    const world = memoryRunWorld({
      runs: [run('team-a', 0, 'Running', 1), run('team-b', 1, 'Pending'), run('team-a', 2, 'Pending')],
      config: configWith(1),
      admissionPlans: plans,
      listed: (namespace) => namespace !== 'team-b' || teamBListed,
      wake: (key) => woken.push(key),
    });
    world.reconciler.wakeQueueHeads();
    expect(woken).toEqual(['team-a/r2']);
    await world.reconciler.reconcile('team-a/r2');
    expect(world.runs.get('team-a', 'r2')?.status?.message).toContain('position 1 ');
    // No run changed: only the report that team-b has listed makes the plan again.
    teamBListed = true;
    plans.namespaceListed();
    await world.reconciler.reconcile('team-a/r2');
    expect(world.runs.get('team-a', 'r2')?.status?.message).toContain('position 2 ');
    woken.length = 0;
    world.reconciler.wakeQueueHeads();
    expect(woken.sort()).toEqual(['team-a/r2', 'team-b/r1']);
  });
});
