// The admission plan kept between reconciles (controller/admission-plan-cache.ts): every queued
// run's recheck read one plan instead of making its own (W queued runs cost W plans of W runs
// each), and a plan is made again once something it was made from moves. The plan count is
// the round-robin decisions made (fair-admission.ts), whichever code path makes them.
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { REASONS, type CodingRun, type Phase } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { AdmissionPlanCache, FAIR_SHARE_TTL_MS } from '../../operator/src/controller/admission-plan-cache.ts';
import type * as FairAdmission from '../../operator/src/reconcile/fair-admission.ts';
import { readNamespacePolicy } from '../../operator/src/reconcile/namespace-policy.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { memoryRunWorld } from '../support/memory-run-world.ts';

const decisions = vi.hoisted(() => ({ made: 0 }));
vi.mock('../../operator/src/reconcile/fair-admission.ts', async (importOriginal) => {
  const real = await importOriginal<typeof FairAdmission>();
  return {
    ...real,
    decideFairAdmission: (...args: Parameters<typeof real.decideFairAdmission>) => {
      decisions.made++;
      return real.decideFairAdmission(...args);
    },
  };
});

const config = loadOperatorConfig(
  { allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 10, allowUnisolatedSandboxes: true, networkPolicy: false },
  {},
);
const accepted = [
  { type: 'Accepted' as const, status: 'True' as const, reason: 'Valid', message: 'ok', lastTransitionTime: '2026-11-29T11:00:00Z' },
];

function run(namespace: string, index: number, phase: Phase): CodingRun {
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
      ...(phase === 'Running' ? { admission: { sequence: index + 1, time: '2026-11-29T11:00:00Z' } } : {}),
    },
  });
}

/** 10 runs holding every slot, and `queued` waiting behind them in the namespace agents. */
function fleet(queued: number): CodingRun[] {
  return [
    ...Array.from({ length: 10 }, (_, index) => run(`team-${index % 3}`, index, 'Running')),
    ...Array.from({ length: queued }, (_, index) => run('agents', 1000 + index, 'Pending')),
  ];
}

const key = (of: CodingRun) => `${of.metadata.namespace}/${of.metadata.name}`;

beforeEach(() => {
  decisions.made = 0;
});

describe('the admission plan kept between reconciles', () => {
  it('makes one plan for W queued runs each reconciled once, though each writes its new place', async () => {
    const runs = fleet(300);
    const world = memoryRunWorld({ runs, config, admissionPlans: new AdmissionPlanCache({ changesReported: true }) });
    for (const queued of runs.slice(10)) await world.reconciler.reconcile(key(queued));
    expect(decisions.made).toBe(1);
    // Every run wrote its place (the fixture's message was not it), and the places are the plan's.
    expect(world.calls.get('replaceRunStatus')).toBe(300);
    expect(world.runs.get('agents', 'r1000')?.status?.queue).toEqual({ heldBy: 'ClusterSlots', position: 1 });
    expect(world.runs.get('agents', 'r1299')?.status?.queue).toEqual({ heldBy: 'ClusterSlots', position: 300 });
  });

  it('makes the plan again once a run finishes, and the head of the queue takes the slot', async () => {
    const runs = fleet(50);
    const world = memoryRunWorld({ runs, config, admissionPlans: new AdmissionPlanCache({ changesReported: true }) });
    for (const queued of runs.slice(10)) await world.reconciler.reconcile(key(queued));
    expect(decisions.made).toBe(1);
    const finishing = world.runs.get('team-0', 'r0')!;
    world.update({ ...finishing, status: { ...finishing.status, phase: 'Succeeded', reason: 'Completed' } });
    await world.reconciler.reconcile('agents/r1000');
    expect(decisions.made).toBe(2);
    expect(world.runs.get('agents', 'r1000')?.status?.phase).toBe('Provisioning');
    // The grant changed what the next plan counts: made again once, then kept.
    await world.reconciler.reconcile('agents/r1001');
    await world.reconciler.reconcile('agents/r1002');
    expect(decisions.made).toBe(3);
    expect(world.runs.get('agents', 'r1001')?.status?.queue).toEqual({ heldBy: 'ClusterSlots', position: 1 });
  });

  it('without reports of the changes, makes a plan at every reconcile, as a reconciler driven by hand must', async () => {
    const runs = fleet(20);
    const world = memoryRunWorld({ runs, config });
    for (const queued of runs.slice(10)) await world.reconciler.reconcile(key(queued));
    expect(decisions.made).toBe(20);
  });

  it("reads the namespaces' policies and tallies again only after FAIR_SHARE_TTL_MS, but at each look of a run whose namespace has a token budget; a changed cap changes the plan", async () => {
    let now = 0;
    let annotations: Record<string, string> = { 'chamvi.dev/tokens-per-day': '1000000' };
    const reads = { policies: 0, tallies: 0 };
    const runs = [...fleet(30), run('small', 5000, 'Pending')];
    const world = memoryRunWorld({
      runs,
      config,
      admissionPlans: new AdmissionPlanCache({ changesReported: true, clock: () => now }),
      fairShare: {
        policyOf: async (namespace) => {
          reads.policies++;
          return readNamespacePolicy(namespace === 'agents' ? annotations : {});
        },
        // The namespace's running runs spend between any two looks: the tally is never the same twice.
        tokensOn: async () => {
          reads.tallies++;
          return 10 + reads.tallies;
        },
      },
    });
    // A run of `small` (no token budget): the first look reads both namespaces; a second within the TTL reads nothing.
    await world.reconciler.reconcile(key(runs.at(-1)!));
    expect(reads).toEqual({ policies: 2, tallies: 1 });
    await world.reconciler.reconcile(key(runs.at(-1)!));
    expect(reads).toEqual({ policies: 2, tallies: 1 });
    // Read again after the TTL.
    now += FAIR_SHARE_TTL_MS;
    await world.reconciler.reconcile(key(runs.at(-1)!));
    expect(reads).toEqual({ policies: 4, tallies: 2 });
    // Runs of `agents`, which has a budget: the tallies are read at each look (a run must not be
    // admitted on a tally read before the budget ran out), and reads that find the budget still
    // unspent keep the plan, however much more was spent.
    for (const queued of runs.slice(10, 30)) await world.reconciler.reconcile(key(queued));
    expect(reads.tallies).toBe(2 + 20);
    expect(decisions.made).toBe(1);
    // An admin caps the namespace at the runs it has active (none): its runs wait for it, not for the cluster.
    annotations = { ...annotations, 'chamvi.dev/max-active-runs': '0' };
    now += FAIR_SHARE_TTL_MS;
    await world.reconciler.reconcile('agents/r1000');
    expect(decisions.made).toBe(2);
    expect(world.runs.get('agents', 'r1000')?.status?.queue).toEqual({ heldBy: 'NamespaceActiveRuns' });
  });

  it('makes the plan again when a namespace spends the last of its budget, and not while its held runs watch the tally grow', async () => {
    let spent = 10;
    const runs = fleet(30);
    const world = memoryRunWorld({
      runs,
      config,
      admissionPlans: new AdmissionPlanCache({ changesReported: true }),
      fairShare: {
        policyOf: async (namespace) => readNamespacePolicy(namespace === 'agents' ? { 'chamvi.dev/tokens-per-day': '1000' } : {}),
        tokensOn: async (namespace) => (namespace === 'agents' ? spent : 0),
      },
    });
    for (const queued of runs.slice(10)) await world.reconciler.reconcile(key(queued));
    expect(decisions.made).toBe(1);
    expect(world.runs.get('agents', 'r1000')?.status?.queue).toEqual({ heldBy: 'ClusterSlots', position: 1 });
    // The budget is spent: the runs wait for it, not for a cluster slot.
    spent = 1000;
    for (const queued of runs.slice(10)) await world.reconciler.reconcile(key(queued));
    expect(decisions.made).toBe(2);
    const held = world.runs.get('agents', 'r1029')!.status!;
    expect(held.queue).toEqual({ heldBy: 'NamespaceTokenBudget' });
    expect(held.message).toContain('namespace agents has spent its 1000 tokens for 2026-11-29 (annotation chamvi.dev/tokens-per-day)');
    // The namespace's running runs go on spending: neither a plan nor a status write per look.
    const writes = world.calls.get('replaceRunStatus');
    for (const queued of runs.slice(10)) {
      spent += 7;
      await world.reconciler.reconcile(key(queued));
    }
    expect(decisions.made).toBe(2);
    expect(world.calls.get('replaceRunStatus')).toBe(writes);
  });

  // The leader keeps the last admission past its run: c was admitted (10), then a (11), and a's
  // run went at once (ttlSecondsAfterFinished: 0). Read off the runs left, a's next run took b's
  // turn and the sequence 11 again.
  it('gives the next slot to the namespace after the one admitted last though that run is deleted, and numbers on from it', async () => {
    const one = loadOperatorConfig(
      { allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 1, allowUnisolatedSandboxes: true, networkPolicy: false },
      {},
    );
    const c1 = run('c', 1, 'Running');
    const runs = [
      { ...c1, status: { ...c1.status, admission: { sequence: 10, time: '2026-11-29T11:00:00Z' } } },
      run('a', 2, 'Pending'),
      run('a', 3, 'Pending'),
      run('b', 4, 'Pending'),
    ];
    const world = memoryRunWorld({ runs, config: one, admissionPlans: new AdmissionPlanCache({ changesReported: true }) });
    const finish = (namespace: string, name: string) => {
      const finished = world.runs.get(namespace, name)!;
      world.update({ ...finished, status: { ...finished.status, phase: 'Succeeded', reason: 'Completed' } });
    };
    finish('c', 'r1');
    await world.reconciler.reconcile('a/r2');
    expect(world.runs.get('a', 'r2')?.status).toMatchObject({ phase: 'Provisioning', admission: { sequence: 11 } });
    finish('a', 'r2');
    world.remove('a', 'r2');
    await world.reconciler.reconcile('a/r3');
    expect(world.runs.get('a', 'r3')?.status?.phase).toBe('Pending');
    await world.reconciler.reconcile('b/r4');
    expect(world.runs.get('b', 'r4')?.status).toMatchObject({ phase: 'Provisioning', admission: { sequence: 12 } });
  });

  it('remembers the admission of a run deleted before any plan saw it: the watch told the reconciler', async () => {
    const one = loadOperatorConfig(
      { allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 1, allowUnisolatedSandboxes: true, networkPolicy: false },
      {},
    );
    // Admitted by the leader before (status.admission 11), finished and deleted before this one made a plan.
    const a1 = run('a', 1, 'Succeeded');
    const runs = [
      { ...a1, status: { ...a1.status, admission: { sequence: 11, time: '2026-11-29T11:00:00Z' } } },
      run('a', 2, 'Pending'),
      run('b', 3, 'Pending'),
    ];
    const world = memoryRunWorld({ runs, config: one, admissionPlans: new AdmissionPlanCache({ changesReported: true }) });
    world.remove('a', 'r1');
    await world.reconciler.reconcile('b/r3');
    expect(world.runs.get('b', 'r3')?.status).toMatchObject({ phase: 'Provisioning', admission: { sequence: 12 } });
  });

  // Another namespace's plan grants agents' run a slot on a tally up to FAIR_SHARE_TTL_MS old;
  // agents spends the last of its tokens before that run's own look.
  it("takes back a slot another namespace's plan granted once the run's namespace has spent its tokens, and hands it on", async () => {
    let spent = 10;
    const runs = [
      ...Array.from({ length: 8 }, (_, index) => run(`team-${index % 3}`, index, 'Running')),
      run('agents', 1000, 'Pending'),
      run('other', 2000, 'Pending'),
      run('other', 2001, 'Pending'),
      run('other', 2002, 'Pending'),
    ];
    const world = memoryRunWorld({
      runs,
      config,
      admissionPlans: new AdmissionPlanCache({ changesReported: true }),
      fairShare: {
        policyOf: async (namespace) => readNamespacePolicy(namespace === 'agents' ? { 'chamvi.dev/tokens-per-day': '1000' } : {}),
        tokensOn: async (namespace) => (namespace === 'agents' ? spent : 0),
      },
    });
    // Two slots free: other's run's plan takes one and grants agents' run the other.
    await world.reconciler.reconcile('other/r2000');
    expect(world.runs.get('other', 'r2000')?.status).toMatchObject({ phase: 'Provisioning', admission: { sequence: 10 } });
    spent = 1000;
    await world.reconciler.reconcile('agents/r1000');
    expect(world.runs.get('agents', 'r1000')?.status).toMatchObject({ phase: 'Pending', queue: { heldBy: 'NamespaceTokenBudget' } });
    // Its slot is free again, and goes to the next run, numbered after the grant taken back.
    await world.reconciler.reconcile('other/r2001');
    expect(world.runs.get('other', 'r2001')?.status).toMatchObject({ phase: 'Provisioning', admission: { sequence: 11 } });
    // agents' run holds no slot: the next one freed goes to other's next run.
    const finishing = world.runs.get('team-0', 'r0')!;
    world.update({ ...finishing, status: { ...finishing.status, phase: 'Succeeded', reason: 'Completed' } });
    await world.reconciler.reconcile('other/r2002');
    expect(world.runs.get('other', 'r2002')?.status).toMatchObject({ phase: 'Provisioning', admission: { sequence: 12 } });
  });

  it("keeps a granted run's slot once its admission is written, though its namespace spends its tokens before the cache shows it", async () => {
    let spent = 10;
    const runs = [
      ...Array.from({ length: 8 }, (_, index) => run(`team-${index % 3}`, index, 'Running')),
      run('agents', 1000, 'Pending'),
      run('other', 2000, 'Pending'),
      run('other', 2001, 'Pending'),
    ];
    const world = memoryRunWorld({
      runs,
      config,
      admissionPlans: new AdmissionPlanCache({ changesReported: true }),
      fairShare: {
        policyOf: async (namespace) => readNamespacePolicy(namespace === 'agents' ? { 'chamvi.dev/tokens-per-day': '1000' } : {}),
        tokensOn: async (namespace) => (namespace === 'agents' ? spent : 0),
      },
      writesNotSeen: new Set(['agents/r1000']),
    });
    await world.reconciler.reconcile('other/r2000');
    await world.reconciler.reconcile('agents/r1000');
    const writes = world.calls.get('replaceRunStatus');
    // Admitted (written, not in the cache yet); its runs spend the budget; it is looked at again from the stale cache.
    spent = 1000;
    await world.reconciler.reconcile('agents/r1000');
    expect(world.calls.get('replaceRunStatus')).toBe(writes! + 1);
    // It still holds its slot: none is free for other's next run.
    await world.reconciler.reconcile('other/r2001');
    expect(world.runs.get('other', 'r2001')?.status?.queue).toEqual({ heldBy: 'ClusterSlots', position: 1 });
  });

  // The grant was used once the run's pod create went out, not once its status write answered:
  // a 409 on that write (the run's author edited its labels) sent the reconcile round again, or
  // a timeout after the write landed failed it, and the next look read the namespace's tally
  // spent: the grant was taken back with the pod up, and the slot went to another run, one
  // sandbox pod over maxActiveRuns.
  it.each([
    { failure: 'a conflict (409), the decision made again at once', landed: false },
    { failure: 'a timeout after the write landed, the run looked at again from the stale cache', landed: true },
  ])(
    "keeps a granted run's slot once its pod was created, though its status write failed and its namespace spent its tokens meanwhile: $failure",
    async ({ landed }) => {
      let spent = 10;
      const runs = [
        ...Array.from({ length: 8 }, (_, index) => run(`team-${index % 3}`, index, 'Running')),
        run('agents', 1000, 'Pending'),
        run('other', 2000, 'Pending'),
        run('other', 2001, 'Pending'),
      ];
      const world = memoryRunWorld({
        runs,
        config,
        admissionPlans: new AdmissionPlanCache({ changesReported: true }),
        fairShare: {
          policyOf: async (namespace) => readNamespacePolicy(namespace === 'agents' ? { 'chamvi.dev/tokens-per-day': '1000' } : {}),
          tokensOn: async (namespace) => (namespace === 'agents' ? spent : 0),
        },
        ...(landed ? { writesNotSeen: new Set(['agents/r1000']) } : {}),
      });
      // The memory world's gateway (memory-run-world.ts) answers every status write; this one
      // fails agents' run's first (the run's runs spend the last tokens meanwhile), and reads a
      // run back for a decision made again after a conflict.
      const kube = (world.reconciler as unknown as { deps: { kube: Record<string, unknown> } }).deps.kube;
      const replaceRunStatus = kube.replaceRunStatus as (run: CodingRun, status: CodingRun['status']) => Promise<CodingRun>;
      const written: Array<CodingRun['status']> = [];
      kube.replaceRunStatus = async (of: CodingRun, status: CodingRun['status']) => {
        if (of.metadata.namespace !== 'agents') return replaceRunStatus(of, status);
        written.push(status);
        if (written.length > 1) return replaceRunStatus(of, status);
        spent = 1000;
        if (!landed) throw Object.assign(new Error('Operation cannot be fulfilled: the object has been modified'), { code: 409 });
        await replaceRunStatus(of, status);
        throw new Error('the request timed out');
      };
      kube.getRun = async (namespace: string, name: string) => world.runs.get(namespace, name);
      // Two slots free: other's run's plan takes one and grants agents' run the other.
      await world.reconciler.reconcile('other/r2000');
      expect(world.runs.get('other', 'r2000')?.status).toMatchObject({ phase: 'Provisioning', admission: { sequence: 10 } });
      if (landed) await expect(world.reconciler.reconcile('agents/r1000')).rejects.toThrow('timed out');
      await world.reconciler.reconcile('agents/r1000');
      // Its pod is up and it holds the slot: none is free for other's next run.
      await world.reconciler.reconcile('other/r2001');
      expect(world.runs.get('other', 'r2001')?.status?.queue).toEqual({ heldBy: 'ClusterSlots', position: 1 });
      // It was admitted again with its grant's sequence, its pod's create sent again (met by the pod).
      expect(written.map((status) => [status?.phase, status?.admission?.sequence])).toEqual([
        ['Provisioning', 9],
        ['Provisioning', 9],
      ]);
      expect(world.calls.get('createPod')).toBe(3);
    },
  );

  it("makes no plan for runs waiting for their namespace's isolation probe: its gate admits nothing, whatever the queue", async () => {
    const strict = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 10, networkPolicy: true }, {});
    const probing = (index: number): CodingRun => {
      const waiting = run('walled', 5000 + index, 'Pending');
      return { ...waiting, status: { ...waiting.status, reason: REASONS.IsolationNotEnforced, message: 'Waiting for a probe' } };
    };
    const runs = [...fleet(300), ...Array.from({ length: 300 }, (_, index) => probing(index))];
    const world = memoryRunWorld({
      runs,
      config: strict,
      admissionPlans: new AdmissionPlanCache({ changesReported: true }),
      // A tenant's default-deny egress policy keeps the probe from deciding.
      isolation: {
        observe: (namespace) =>
          namespace === 'walled' ? { verdict: 'unknown', detail: 'the probe pod reached nothing' } : { verdict: 'enforced' },
      },
    });
    for (let index = 0; index < 300; index++) {
      await world.reconciler.reconcile(`agents/r${1000 + index}`);
      await world.reconciler.reconcile(`walled/r${5000 + index}`);
    }
    expect(decisions.made).toBe(1);
    const walled = world.runs.get('walled', 'r5299')!.status!;
    expect(walled).toMatchObject({ phase: 'Pending', reason: REASONS.IsolationNotEnforced });
    expect(walled.queue).toBeUndefined();
    // They take no place in the queue either.
    expect(world.runs.get('agents', 'r1299')?.status?.queue).toEqual({ heldBy: 'ClusterSlots', position: 300 });
  });

  it("still judges a run behind the isolation probe by its namespace's lists", async () => {
    const strict = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 10, networkPolicy: true }, {});
    const fresh = codingRunFixture({
      metadata: { namespace: 'walled', name: 'new', uid: 'walled-new', creationTimestamp: '2026-11-29T11:00:00Z' },
    });
    const world = memoryRunWorld({
      runs: [fresh],
      config: strict,
      admissionPlans: new AdmissionPlanCache({ changesReported: true }),
      fairShare: {
        policyOf: async () => readNamespacePolicy({ 'chamvi.dev/allow-repo': 'https://github.com/acme/design-*' }),
        tokensOn: async () => 0,
      },
      isolation: { observe: () => ({ verdict: 'unknown' }) },
    });
    await world.reconciler.reconcile('walled/new');
    expect(world.runs.get('walled', 'new')?.status).toMatchObject({ phase: 'Failed', reason: REASONS.RepoNotAllowed });
    expect(decisions.made).toBe(0);
  });
});
