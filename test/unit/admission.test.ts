import { describe, expect, it } from 'vitest';
import type { CodingRun, Phase } from '../../operator/src/api/index.ts';
import { computeAdmission } from '../../operator/src/reconcile/admission.ts';

const run = (name: string, second: number, phase?: Phase): CodingRun => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name, namespace: 'a', uid: `uid-${name}`, creationTimestamp: `2026-11-29T12:00:${String(second).padStart(2, '0')}Z` },
  spec: {} as CodingRun['spec'],
  ...(phase ? { status: { phase } } : {}),
});

describe('computeAdmission', () => {
  it('counts active runs and the older runs still waiting', () => {
    const runs = [
      run('a', 1, 'Running'),
      run('b', 2, 'Provisioning'),
      run('c', 3, 'Pending'),
      run('d', 4),
      run('e', 5),
      run('f', 6, 'Succeeded'),
    ];
    expect(computeAdmission(runs, runs[4]!, new Set())).toEqual({ active: 2, queuedAhead: 2 });
  });

  it('orders runs created in the same second by name', () => {
    const runs = [run('r-02', 1), run('r-01', 1), run('r-03', 1)];
    expect(computeAdmission(runs, runs[0]!, new Set()).queuedAhead).toBe(1);
  });

  it('counts runs the controller admitted before its cache caught up as active', () => {
    const runs = [run('a', 1), run('b', 2)];
    expect(computeAdmission(runs, runs[1]!, new Set(['uid-a']))).toEqual({ active: 1, queuedAhead: 0 });
  });

  it('counts a finished run whose sandbox pod is still up as holding its slot, until the pod goes', () => {
    const runs = [run('a', 1, 'Failed'), run('b', 2, 'Succeeded'), run('c', 3)];
    const podsUp = new Set(['uid-a']);
    expect(computeAdmission(runs, runs[2]!, new Set(), (other) => podsUp.has(other.metadata.uid))).toEqual({ active: 1, queuedAhead: 0 });
    podsUp.clear();
    expect(computeAdmission(runs, runs[2]!, new Set(), (other) => podsUp.has(other.metadata.uid))).toEqual({ active: 0, queuedAhead: 0 });
  });
});
