// The record of TTL-deleted runs (reconcile/finished-runs.ts, #15.2): which specs count as the
// same run, how the ConfigMap stays bounded, and that a malformed entry is no record. Pure.
import { describe, expect, it } from 'vitest';
import {
  FINISHED_RUNS_KEPT,
  findFinishedRun,
  isFinishedRunsData,
  specSha256,
  withFinishedRun,
  type FinishedRunRecord,
} from '../../operator/src/reconcile/finished-runs.ts';

const finished = (deletedAt: string): FinishedRunRecord => ({
  uid: 'u',
  specSha256: 'a'.repeat(64),
  phase: 'Succeeded',
  reason: 'Completed',
  completionTime: '2026-11-30T09:00:00Z',
  deletedAt,
});

describe('specSha256: what makes two runs the same run', () => {
  const spec = { task: 'Fix it', repository: { url: 'https://github.com/acme/app.git', revision: 'main' }, budget: { maxSteps: 40 } };

  it('ignores key order and ttlSecondsAfterFinished', () => {
    const reordered = {
      budget: { maxSteps: 40 },
      repository: { revision: 'main', url: 'https://github.com/acme/app.git' },
      task: 'Fix it',
    };
    expect(specSha256({ ...reordered, ttlSecondsAfterFinished: 10 })).toBe(specSha256(spec));
  });

  it('keeps the digests already recorded: integer-like keys sorted as text, escapes as JSON.stringify writes them', () => {
    // Computed by the operator before canonical-json.ts served finished-runs.ts: records in
    // chamvi-finished-runs carry digests of this form, so a change here would run them again.
    const recorded = {
      ...spec,
      sandbox: {
        env: [
          { name: 'B', value: 'é\u2028' },
          { name: 'A', value: '"\\' },
        ],
      },
      x: { '10': 1, '2': 2, '': 3, b: null, a: [1.5e-7, 1e21, true] },
    };
    expect(specSha256(recorded)).toBe('a8a12526926b11634efc5a72001d0b254da00980b2b3e66d4d78c11981ebc79f');
  });

  it.each([
    ['the task', { ...spec, task: 'Fix it again' }],
    ['a nested field', { ...spec, repository: { ...spec.repository, revision: 'v2' } }],
    ['the budget', { ...spec, budget: { maxSteps: 41 } }],
  ])('changes with %s', (_, other) => {
    expect(specSha256(other)).not.toBe(specSha256(spec));
  });
});

describe('the chamvi-finished-runs data', () => {
  it('adds and finds a record by run name', () => {
    const data = withFinishedRun({}, 'fix', finished('2026-11-30T10:00:00Z'));
    expect(findFinishedRun(data, 'fix')).toEqual(finished('2026-11-30T10:00:00Z'));
    expect(findFinishedRun(data, 'other')).toBeUndefined();
  });

  it.each([
    ['not JSON', '{'],
    ['a phase that is not terminal', JSON.stringify({ ...finished('x'), phase: 'Running' })],
    ['a digest that is not one', JSON.stringify({ ...finished('x'), specSha256: 'zz' })],
  ])('treats %s as no record (it can only keep a run from running, never start one)', (_, raw) => {
    expect(findFinishedRun({ fix: raw }, 'fix')).toBeUndefined();
  });

  it('forgets the runs deleted longest ago past the bound', () => {
    let data: Record<string, string> = {};
    for (const [name, at] of [
      ['b', '2026-11-30T10:00:02Z'],
      ['a', '2026-11-30T10:00:01Z'],
      ['c', '2026-11-30T10:00:03Z'],
    ] as const)
      data = withFinishedRun(data, name, finished(at), 2);
    expect(Object.keys(data).sort()).toEqual(['b', 'c']);
  });

  it('drops entries that are no record first, reading each once, and knows a ConfigMap far past the bound for not its own', () => {
    // What anyone who may create ConfigMaps can put at the name: 170 000 keys of nothing. The
    // sort read each entry twice per comparison (1.7 s of the shared event loop a try).
    const hostile = Object.fromEntries(Array.from({ length: 170_000 }, (_, i) => [`k${i}`, '']));
    expect(isFinishedRunsData(hostile)).toBe(false);
    const kept: Record<string, string> = {};
    for (let i = 0; i < FINISHED_RUNS_KEPT; i++)
      kept[`run-${i}`] = JSON.stringify(finished(`2026-11-30T10:${String(i % 60).padStart(2, '0')}:00Z`));
    expect(isFinishedRunsData(kept)).toBe(true);
    const data = withFinishedRun({ ...kept, broken: '{not json', empty: '' }, 'fix', finished('2026-11-30T11:00:00Z'));
    expect(Object.keys(data)).toHaveLength(FINISHED_RUNS_KEPT);
    expect(data).not.toHaveProperty('broken');
    expect(data).not.toHaveProperty('empty');
    expect(findFinishedRun(data, 'fix')).toEqual(finished('2026-11-30T11:00:00Z'));
  });
});
