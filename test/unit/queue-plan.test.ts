// One plan for every waiting run (admission.ts planQueue, admissionFrom) answers what each
// run's own plan (computeAdmission) answers: the controller keeps one plan for all of its
// queued runs' rechecks, and no run's admission, place or message may differ for it.
// admissionFactsChanged says which changes to a run can make a kept plan wrong.
import { describe, expect, it } from 'vitest';
import type { CodingRun, Phase } from '../../operator/src/api/index.ts';
import {
  admissionFactsChanged,
  admissionFrom,
  computeAdmission,
  planQueue,
  type AdmissionContext,
  type Grant,
} from '../../operator/src/reconcile/admission.ts';
import { readNamespacePolicy } from '../../operator/src/reconcile/namespace-policy.ts';

/** A small deterministic generator (mulberry32): the same scenarios at every run. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PHASES: Array<Phase | undefined> = [undefined, 'Pending', 'Pending', 'Pending', 'Provisioning', 'Running', 'Succeeded', 'Failed'];

function scenario(seed: number): { runs: CodingRun[]; context: AdmissionContext } {
  const next = random(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const namespaces = ['a', 'b', 'c', 'd'].slice(0, 1 + Math.floor(next() * 4));
  const runs: CodingRun[] = [];
  let sequence = 0;
  for (let index = 0; index < 5 + Math.floor(next() * 40); index++) {
    const phase = pick(PHASES);
    const waiting = phase === undefined || phase === 'Pending';
    const refused = waiting && next() < 0.15;
    const probing = phase === 'Pending' && next() < 0.1;
    runs.push({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: {
        namespace: pick(namespaces),
        name: `r${index}`,
        uid: `uid-${index}`,
        // Some in the same second: ordered by namespace, then name.
        creationTimestamp: `2026-11-29T12:00:${String(Math.floor(next() * 20)).padStart(2, '0')}Z`,
        ...(waiting && next() < 0.05 ? { deletionTimestamp: '2026-11-29T12:05:00Z' } : {}),
      },
      spec: {} as CodingRun['spec'],
      ...(phase
        ? {
            status: {
              phase,
              ...(probing ? { reason: 'IsolationNotEnforced' } : {}),
              ...(!waiting && next() < 0.7 ? { admission: { sequence: ++sequence, time: '2026-11-29T12:01:00Z' } } : {}),
              ...(refused
                ? {
                    conditions: [
                      { type: 'SandboxReady', status: 'False' as const, reason: 'SandboxRefused', message: '', lastTransitionTime: '' },
                    ],
                  }
                : {}),
            },
          }
        : {}),
    });
  }
  const waitingRuns = runs.filter((run) => (run.status?.phase ?? 'Pending') === 'Pending');
  const admittedLocally = new Set<string>();
  const grants = new Map<string, Grant>();
  for (const run of waitingRuns) {
    const roll = next();
    if (roll < 0.08) admittedLocally.add(run.metadata.uid);
    else if (roll < 0.16) {
      admittedLocally.add(run.metadata.uid);
      grants.set(run.metadata.uid, {
        uid: run.metadata.uid,
        namespace: run.metadata.namespace,
        name: run.metadata.name,
        sequence: ++sequence,
      });
    }
  }
  const policies = new Map(
    namespaces.map((namespace) => {
      const annotations: Record<string, string> = {};
      if (next() < 0.5) annotations['chamvi.dev/max-active-runs'] = String(Math.floor(next() * 4));
      if (next() < 0.3) annotations['chamvi.dev/tokens-per-day'] = '1000';
      return [namespace, readNamespacePolicy(annotations)];
    }),
  );
  const budgets = new Map(
    [...policies].flatMap(([namespace, policy]) =>
      policy.tokensPerDay !== undefined
        ? [[namespace, { tokensPerDay: 1000, usedToday: next() < 0.5 ? 1000 : 10, day: '2026-11-29' }] as const]
        : [],
    ),
  );
  const podsUp = new Set(runs.filter(() => next() < 0.3).map((run) => run.metadata.uid));
  return {
    runs,
    context: {
      maxActiveRuns: 1 + Math.floor(next() * 12),
      ...(next() < 0.5 ? { namespaceMaxActiveRuns: 1 + Math.floor(next() * 5) } : {}),
      admittedLocally,
      holdsSandbox: (run) => podsUp.has(run.metadata.uid),
      policies,
      budgets,
      grants,
    },
  };
}

describe('one plan for every waiting run', () => {
  it('gives every run the cache shows waiting the admission, place, message and grants of its own plan (500 random queues)', () => {
    let compared = 0;
    let shared = 0;
    for (let seed = 1; seed <= 500; seed++) {
      const { runs, context } = scenario(seed);
      const plan = planQueue(runs, context);
      for (const self of runs) {
        if (self.metadata.deletionTimestamp || (self.status?.phase ?? 'Pending') !== 'Pending') continue;
        expect(admissionFrom(plan, runs, self, context), `seed ${seed}, ${self.metadata.name}`).toEqual(
          computeAdmission(runs, self, context),
        );
        compared++;
        if (plan.waiting.has(self.metadata.uid) || plan.grantOf.has(self.metadata.uid)) shared++;
      }
    }
    // Most answers came off the shared plan; the rest (probing, admitted here) from plans of their own.
    expect(shared).toBeGreaterThan(compared * 0.6);
    expect(shared).toBeLessThan(compared);
  });
});

describe('admissionFactsChanged', () => {
  const queued: CodingRun = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { namespace: 'a', name: 'r', uid: 'uid-r', creationTimestamp: '2026-11-29T12:00:00Z', resourceVersion: '1' },
    spec: {} as CodingRun['spec'],
    status: { phase: 'Pending', reason: 'Queued', message: 'Queued: position 4', queue: { heldBy: 'ClusterSlots', position: 4 } },
  };
  const status = (change: Partial<NonNullable<CodingRun['status']>>): CodingRun => ({ ...queued, status: { ...queued.status, ...change } });

  it('leaves the plan for a queued run’s new place and a new resourceVersion', () => {
    const moved = { ...status({ message: 'Queued: position 3', queue: { heldBy: 'ClusterSlots', position: 3 } }) };
    expect(admissionFactsChanged(queued, { ...moved, metadata: { ...moved.metadata, resourceVersion: '2' } })).toBe(false);
  });

  it('makes it again for a run first seen, admitted, ended, deleted, refused or waiting for its probe', () => {
    expect(admissionFactsChanged(undefined, queued)).toBe(true);
    expect(admissionFactsChanged(queued, status({ phase: 'Provisioning' }))).toBe(true);
    expect(admissionFactsChanged(queued, status({ admission: { sequence: 7, time: '2026-11-29T12:01:00Z' } }))).toBe(true);
    expect(admissionFactsChanged(queued, { ...queued, metadata: { ...queued.metadata, deletionTimestamp: '2026-11-29T12:05:00Z' } })).toBe(
      true,
    );
    expect(admissionFactsChanged(queued, status({ reason: 'IsolationNotEnforced' }))).toBe(true);
    expect(admissionFactsChanged(queued, status({ podName: 'pool-pod-1' }))).toBe(true);
    const refused = status({
      conditions: [{ type: 'SandboxReady', status: 'False', reason: 'SandboxRefused', message: '', lastTransitionTime: '' }],
    });
    expect(admissionFactsChanged(queued, refused)).toBe(true);
  });
});
