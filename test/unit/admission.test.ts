import { describe, expect, it } from 'vitest';
import type { CodingRun, Phase } from '../../operator/src/api/index.ts';
import {
  admissionFactsChanged,
  admissionFrom,
  computeAdmission as plan,
  laterAdmission,
  planQueue,
  queueHeads,
  type AdmissionContext,
} from '../../operator/src/reconcile/admission.ts';
import { readNamespacePolicy } from '../../operator/src/reconcile/namespace-policy.ts';

const run = (name: string, second: number, phase?: Phase, namespace = 'a', sequence?: number): CodingRun => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name, namespace, uid: `uid-${name}`, creationTimestamp: `2026-11-29T12:00:${String(second).padStart(2, '0')}Z` },
  spec: {} as CodingRun['spec'],
  ...(phase ? { status: { phase, ...(sequence ? { admission: { sequence, time: '2026-11-29T12:01:00Z' } } : {}) } } : {}),
});

const computeAdmission = (...args: Parameters<typeof plan>) => plan(...args).admission;
const context = (overrides: Partial<AdmissionContext> = {}): AdmissionContext => ({
  maxActiveRuns: 4,
  admittedLocally: new Set(),
  ...overrides,
});

describe('computeAdmission', () => {
  it('queues a run behind the older waiting runs when the active runs leave too few slots', () => {
    const runs = [
      run('a', 1, 'Running'),
      run('b', 2, 'Provisioning'),
      run('c', 3, 'Pending'),
      run('d', 4),
      run('e', 5),
      run('f', 6, 'Succeeded'),
    ];
    expect(computeAdmission(runs, runs[4]!, context())).toMatchObject({ admit: false, heldBy: 'ClusterSlots', position: 1 });
    expect(computeAdmission(runs, runs[2]!, context())).toEqual({ admit: true, sequence: 1 });
    expect(computeAdmission(runs, runs[3]!, context())).toEqual({ admit: true, sequence: 2 });
  });

  it('orders runs created in the same second by name', () => {
    const runs = [run('r-02', 1), run('r-01', 1), run('r-03', 1)];
    expect(computeAdmission(runs, runs[0]!, context({ maxActiveRuns: 1 }))).toMatchObject({ admit: false, position: 1 });
    expect(computeAdmission(runs, runs[1]!, context({ maxActiveRuns: 1 }))).toMatchObject({ admit: true });
  });

  it('counts runs the controller admitted before its cache caught up as active', () => {
    const runs = [run('a', 1), run('b', 2)];
    expect(computeAdmission(runs, runs[1]!, context({ maxActiveRuns: 1, admittedLocally: new Set(['uid-a']) }))).toMatchObject({
      admit: false,
      heldBy: 'ClusterSlots',
      position: 1,
    });
  });

  it('counts a finished run whose sandbox pod is still up as holding its slot, until the pod goes', () => {
    const runs = [run('a', 1, 'Failed'), run('b', 2, 'Succeeded'), run('c', 3)];
    const podsUp = new Set(['uid-a']);
    const holdsSandbox = (other: CodingRun) => podsUp.has(other.metadata.uid);
    expect(computeAdmission(runs, runs[2]!, context({ maxActiveRuns: 1, holdsSandbox }))).toMatchObject({ admit: false });
    podsUp.clear();
    expect(computeAdmission(runs, runs[2]!, context({ maxActiveRuns: 1, holdsSandbox }))).toMatchObject({ admit: true });
  });

  it('frees the slot of a deleted run whose chamvi.dev/cleanup finalizer is gone once its pod goes, whatever finalizer of another holds it', () => {
    // Its author's own finalizer keeps it Running forever: no reconcile ends it, and it held a slot with no pod.
    const held = (name: string, finalizers: string[]): CodingRun => ({
      ...run(name, 1, 'Running'),
      metadata: { ...run(name, 1).metadata, deletionTimestamp: '2026-11-29T12:02:00Z', finalizers },
    });
    const podsUp = new Set(['uid-a']);
    const holdsSandbox = (other: CodingRun) => podsUp.has(other.metadata.uid);
    const runs = [held('a', ['example.com/keep']), run('b', 2)];
    expect(computeAdmission(runs, runs[1]!, context({ maxActiveRuns: 1, holdsSandbox }))).toMatchObject({ admit: false });
    podsUp.clear();
    expect(computeAdmission(runs, runs[1]!, context({ maxActiveRuns: 1, holdsSandbox }))).toMatchObject({ admit: true });
    expect(computeAdmission(runs, runs[1]!, context({ maxActiveRuns: 1 }))).toMatchObject({ admit: true });
    // With the operator's finalizer still on it, its deletion is under way and it holds its slot until then.
    const deleting = [held('a', ['chamvi.dev/cleanup', 'example.com/keep']), run('b', 2)];
    expect(computeAdmission(deleting, deleting[1]!, context({ maxActiveRuns: 1 }))).toMatchObject({ admit: false });
    // Losing that finalizer moves the plan.
    expect(admissionFactsChanged(deleting[0], runs[0]!)).toBe(true);
  });

  it('gives the slot to the namespace after the one admitted last, though its run is younger, and numbers the sequence on', () => {
    // a's runs are older (FIFO would take a2), but a was served last.
    const runs = [run('a1', 1, 'Running', 'a', 5), run('a2', 2, undefined, 'a'), run('b1', 3, undefined, 'b')];
    const one = context({ maxActiveRuns: 2 });
    expect(computeAdmission(runs, runs[2]!, one)).toEqual({ admit: true, sequence: 6 });
    expect(computeAdmission(runs, runs[1]!, one)).toMatchObject({ admit: false, position: 1 });
    // The process granted b1 a slot, before its cache shows it: a's turn.
    const grants = new Map([['uid-b1', { uid: 'uid-b1', namespace: 'b', name: 'b1', sequence: 6 }]]);
    const after = context({ maxActiveRuns: 3, admittedLocally: new Set(['uid-b1']), grants });
    expect(computeAdmission(runs, runs[1]!, after)).toEqual({ admit: true, sequence: 7 });
  });

  // c was admitted (10), then a (11), and a's run is gone (deleted, or ttlSecondsAfterFinished: 0).
  // Read off the runs left, the turn order went back to c's, and a's next run took b's turn and
  // a's sequence number again: a tenant deleting its runs got twice its share.
  it.each([
    {
      case: "a's run finished, still there",
      runs: [run('a1', 1, 'Succeeded', 'a', 11)],
      lastAdmitted: undefined,
      next: { name: 'b1', sequence: 12 },
    },
    {
      case: "a's run deleted: the leader's mark remembers it",
      runs: [],
      lastAdmitted: { namespace: 'a', sequence: 11 },
      next: { name: 'b1', sequence: 12 },
    },
    {
      case: 'a run shows a later admission than the mark: the later one counts',
      runs: [run('b0', 0, 'Succeeded', 'b', 12)],
      lastAdmitted: { namespace: 'a', sequence: 11 },
      next: { name: 'c2', sequence: 13 },
    },
  ])('gives the slot after the namespace admitted last, though its run is gone, and never reuses its sequence: $case', (row) => {
    const runs = [
      run('c1', 2, 'Running', 'c', 10),
      run('a2', 3, undefined, 'a'),
      run('b1', 4, undefined, 'b'),
      run('c2', 5, undefined, 'c'),
      ...row.runs,
    ];
    const made = plan(runs, runs[1]!, context({ maxActiveRuns: 2, ...(row.lastAdmitted ? { lastAdmitted: row.lastAdmitted } : {}) }));
    expect(made.granted.map(({ name, sequence }) => ({ name, sequence }))).toEqual([row.next]);
  });

  it('plans once: every run the plan admits is granted its sequence, and a granted run is admitted with it whatever the queue says then', () => {
    const runs = [run('a1', 1), run('a2', 2), run('b1', 3, undefined, 'b'), run('b2', 4, undefined, 'b'), run('a3', 5)];
    const made = plan(runs, runs[4]!, context({ maxActiveRuns: 3 }));
    expect(made.admission).toMatchObject({ admit: false, position: 2 });
    expect(made.granted.map(({ name, sequence }) => `${name}:${sequence}`)).toEqual(['a1:1', 'b1:2', 'a2:3']);
    // a2 is reconciled first, and b1 after: each gets the plan's sequence, so the order stays a, b, a.
    const grants = new Map(made.granted.map((grant) => [grant.uid, grant]));
    const later = context({ maxActiveRuns: 3, admittedLocally: new Set(grants.keys()), grants });
    expect(computeAdmission(runs, runs[1]!, later)).toEqual({ admit: true, sequence: 3 });
    expect(computeAdmission(runs, runs[2]!, later)).toEqual({ admit: true, sequence: 2 });
    expect(computeAdmission(runs, runs[3]!, later)).toMatchObject({ admit: false, heldBy: 'ClusterSlots', position: 1 });
  });

  it("holds a namespace's runs at its own cap and names the annotation", () => {
    const runs = [run('a1', 1, 'Running', 'team'), run('a2', 2, undefined, 'team')];
    const policies = new Map([['team', readNamespacePolicy({ 'chamvi.dev/max-active-runs': '1' })]]);
    const admission = computeAdmission(runs, runs[1]!, context({ policies }));
    expect(admission).toMatchObject({ admit: false, heldBy: 'NamespaceActiveRuns' });
    expect(admission.admit === false && admission.message).toContain(
      'namespace team has 1 of its 1 runs active (annotation chamvi.dev/max-active-runs)',
    );
  });

  it("caps a namespace without an annotation at the operator's namespaceMaxActiveRuns; an annotation wins either way", () => {
    const runs = [
      run('a1', 1, 'Running', 'first'),
      run('a2', 2, 'Running', 'first'),
      run('a3', 3, undefined, 'first'),
      run('b1', 4, undefined, 'later'),
      run('c1', 5, 'Running', 'wide'),
      run('c2', 6, 'Running', 'wide'),
      run('c3', 7, undefined, 'wide'),
    ];
    const capped = context({ maxActiveRuns: 10, namespaceMaxActiveRuns: 2 });
    const held = computeAdmission(runs, runs[2]!, capped);
    expect(held).toMatchObject({ admit: false, heldBy: 'NamespaceActiveRuns' });
    expect(held.admit === false && held.message).toContain(
      'namespace first has 2 of its 2 runs active (operator namespaceMaxActiveRuns; annotation chamvi.dev/max-active-runs sets another)',
    );
    expect(computeAdmission(runs, runs[3]!, capped)).toMatchObject({ admit: true });
    const policies = new Map([['wide', readNamespacePolicy({ 'chamvi.dev/max-active-runs': '5' })]]);
    expect(computeAdmission(runs, runs[6]!, { ...capped, policies })).toMatchObject({ admit: true });
    // Without the default, only the cluster's slots hold it.
    expect(computeAdmission(runs, runs[2]!, context({ maxActiveRuns: 10 }))).toMatchObject({ admit: true });
  });

  // A run whose pod a LimitRange refuses (403, taken as a refusal that may clear) is retried
  // every 10 s; first in its namespace's queue, it took the namespace's one slot at every round.
  it('queues a run whose sandbox was refused behind the runs never refused, in its namespace and the cluster', () => {
    const refused: CodingRun = {
      ...run('old', 1, 'Pending', 'team'),
      status: {
        phase: 'Pending',
        reason: 'Queued',
        conditions: [
          {
            type: 'SandboxReady',
            status: 'False',
            reason: 'SandboxRefused',
            message: 'forbidden: maximum cpu usage per Container is 2',
            lastTransitionTime: '2026-11-29T12:00:30Z',
          },
        ],
      },
    };
    const younger = run('young', 2, undefined, 'team');
    const policies = new Map([['team', readNamespacePolicy({ 'chamvi.dev/max-active-runs': '1' })]]);
    expect(computeAdmission([refused, younger], younger, context({ policies }))).toMatchObject({ admit: true });
    expect(computeAdmission([refused, younger], refused, context({ policies }))).toMatchObject({
      admit: false,
      heldBy: 'NamespaceActiveRuns',
    });
    // Alone, it is tried again.
    expect(computeAdmission([refused], refused, context({ policies }))).toMatchObject({ admit: true });
  });

  it("passes over a run waiting for its namespace's isolation probe: the slot goes to the next namespace's run", () => {
    // b was served last, so c is next; c's run waits for the probe and would hand the slot back.
    const stuck: CodingRun = {
      ...run('c1', 1, 'Pending', 'c'),
      status: { phase: 'Pending', reason: 'IsolationNotEnforced', message: 'waiting for the probe' },
    };
    const runs = [run('b0', 0, 'Running', 'b', 3), stuck, run('d1', 2, undefined, 'd')];
    expect(computeAdmission(runs, runs[2]!, context({ maxActiveRuns: 2 }))).toEqual({ admit: true, sequence: 4 });
    // Its own plan, once the gate is open, counts it as ever.
    expect(computeAdmission([runs[0]!, stuck], stuck, context({ maxActiveRuns: 2 }))).toEqual({ admit: true, sequence: 4 });
  });

  it('holds the runs of a namespace whose tokens for the day are spent, and says until when', () => {
    const runs = [run('t1', 1, undefined, 'team'), run('o1', 2, undefined, 'other')];
    const policies = new Map([['team', readNamespacePolicy({ 'chamvi.dev/tokens-per-day': '1000' })]]);
    const budgets = new Map([['team', { tokensPerDay: 1000, usedToday: 1000, day: '2026-11-29' }]]);
    const held = computeAdmission(runs, runs[0]!, context({ policies, budgets }));
    expect(held).toMatchObject({ admit: false, heldBy: 'NamespaceTokenBudget' });
    expect(held.admit === false && held.message).toContain(
      'has spent its 1000 tokens for 2026-11-29 (annotation chamvi.dev/tokens-per-day)',
    );
    expect(held.admit === false && held.message).toContain('00:00 UTC');
    expect(computeAdmission(runs, runs[1]!, context({ policies, budgets }))).toMatchObject({ admit: true });
    const under = new Map([['team', { tokensPerDay: 1000, usedToday: 999, day: '2026-11-29' }]]);
    expect(computeAdmission(runs, runs[0]!, context({ policies, budgets: under }))).toMatchObject({ admit: true });
  });

  // Another namespace's plan granted t1 a slot on a budget view up to FAIR_SHARE_TTL_MS old; by
  // t1's own look (the tally read now), team had spent its tokens, and the grant admitted it.
  it('takes back a slot granted to a run whose namespace spent its tokens since, and hands it on; not one this process acted on (its pod create or admission sent)', () => {
    const runs = [run('o0', 0, 'Running', 'other', 1), run('t1', 1, undefined, 'team'), run('o1', 2, undefined, 'other')];
    const policies = new Map([['team', readNamespacePolicy({ 'chamvi.dev/tokens-per-day': '1000' })]]);
    const spent = new Map([['team', { tokensPerDay: 1000, usedToday: 1000, day: '2026-11-29' }]]);
    const grant = { uid: 'uid-t1', namespace: 'team', name: 't1', sequence: 2 };
    const granted = (used: boolean) =>
      context({
        maxActiveRuns: 2,
        policies,
        budgets: spent,
        admittedLocally: new Set(['uid-t1']),
        grants: new Map([['uid-t1', used ? { ...grant, used: true as const } : grant]]),
      });
    const made = plan(runs, runs[1]!, granted(false));
    expect(made.admission).toMatchObject({ admit: false, heldBy: 'NamespaceTokenBudget' });
    expect(made.withdrawn).toEqual(grant);
    // The slot it gives back goes to the next namespace's run, numbered after the grant.
    expect(made.granted.map(({ name, sequence }) => `${name}:${sequence}`)).toEqual(['o1:3']);
    // The shared plan (queue-plan) answers the same.
    expect(admissionFrom(planQueue(runs, granted(false)), runs, runs[1]!, granted(false)).withdrawn).toEqual(grant);
    // Used already (its pod create or admission sent; the cache does not show it yet): it may be up, and keeps its slot.
    expect(plan(runs, runs[1]!, granted(true))).toEqual({ admission: { admit: true, sequence: 2 }, granted: [] });
    // Within its budget, the grant stands.
    const under = new Map([['team', { tokensPerDay: 1000, usedToday: 999, day: '2026-11-29' }]]);
    expect(plan(runs, runs[1]!, { ...granted(false), budgets: under })).toEqual({ admission: { admit: true, sequence: 2 }, granted: [] });
  });
});

describe('queueHeads: the runs a freed slot wakes', () => {
  const names = (runs: CodingRun[]) => runs.map((one) => one.metadata.name).sort();

  it('is the run each namespace serves next, not every queued run', () => {
    const runs = [
      run('a-old', 1, 'Pending', 'a'),
      run('a-new', 2, 'Pending', 'a'),
      run('a-newest', 3, undefined, 'a'),
      run('b-old', 4, 'Pending', 'b'),
      run('b-new', 5, 'Pending', 'b'),
      run('c-running', 0, 'Running', 'c'),
      run('c-done', 0, 'Succeeded', 'c'),
    ];
    expect(names(queueHeads(runs, new Set()))).toEqual(['a-old', 'b-old']);
  });

  it('passes over runs that are not waiting: admitted here already, being deleted, waiting for isolation', () => {
    const deleting = {
      ...run('a-1', 1, 'Pending', 'a'),
      metadata: { ...run('a-1', 1).metadata, deletionTimestamp: '2026-11-29T12:02:00Z' },
    };
    const isolation = { ...run('b-1', 1, 'Pending', 'b'), status: { phase: 'Pending' as const, reason: 'IsolationNotEnforced' } };
    const runs = [deleting, run('a-2', 2, 'Pending', 'a'), run('a-3', 3, 'Pending', 'a'), isolation, run('b-2', 2, 'Pending', 'b')];
    expect(names(queueHeads(runs, new Set(['uid-a-2'])))).toEqual(['a-3', 'b-2']);
  });

  it('serves a run the API server refused after the runs never refused, as the plan does', () => {
    const refused = {
      ...run('a-1', 1, 'Pending', 'a'),
      status: {
        phase: 'Pending' as const,
        conditions: [{ type: 'SandboxReady', status: 'False' as const, reason: 'SandboxRefused', message: '', lastTransitionTime: '' }],
      },
    };
    expect(names(queueHeads([refused, run('a-2', 2, 'Pending', 'a')], new Set()))).toEqual(['a-2']);
    expect(names(queueHeads([refused], new Set()))).toEqual(['a-1']);
  });

  it("hands out every free slot from one head's reconcile: its plan grants the other namespaces' runs too", () => {
    const runs = [run('a-1', 1, 'Pending', 'a'), run('a-2', 2, 'Pending', 'a'), run('b-1', 3, 'Pending', 'b'), run('x', 0, 'Running', 'x')];
    const [head] = queueHeads(runs, new Set());
    const made = plan(runs, head!, context({ maxActiveRuns: 3 }));
    expect(made.granted.map((grant) => grant.name)).toEqual(['a-1', 'b-1']);
  });
});

describe('laterAdmission, the mark of the last admission', () => {
  it('is raised only by a later admission, and never past the integers a sequence can count on', () => {
    const mark = { namespace: 'a', sequence: 11 };
    expect(laterAdmission(mark, { namespace: 'b', sequence: 12 })).toEqual({ namespace: 'b', sequence: 12 });
    expect(laterAdmission(mark, { namespace: 'b', sequence: 10 })).toBe(mark);
    expect(laterAdmission(mark, undefined)).toBe(mark);
    // A status writer's 2^53: the next sequence would equal it, and the order would stick there.
    expect(laterAdmission(mark, { namespace: 'z', sequence: 2 ** 53 })).toBe(mark);
    expect(laterAdmission(mark, { namespace: 'z', sequence: Number.MAX_SAFE_INTEGER })).toBe(mark);
    expect(laterAdmission(undefined, { namespace: 'z', sequence: 1.5 })).toBeUndefined();
  });
});
