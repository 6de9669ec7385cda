// The run reference (workers/run-ref.ts): what a job or a state says about which run it is for.
import { describe, expect, it } from 'vitest';
import { describeRunRef, isSameRun, runRefFrom, runRefOf } from '../../operator/src/workers/run-ref.ts';

const ref = { uid: 'uid-a', namespace: 'team-a', name: 'run-a' };

describe('the run reference', () => {
  it("takes a run object's uid, namespace and name", () => {
    expect(runRefOf({ metadata: { ...ref, labels: { x: 'y' } } as typeof ref })).toEqual(ref);
  });

  it('keeps only the reference of job data, never what travels with it (the MAC, the step, an approval)', () => {
    const data = { ...ref, step: 3, approval: { id: 's1-c1', decision: 'deny' as const }, mac: 'abc' };
    expect(runRefFrom(data)).toEqual(ref);
    expect(Object.keys(runRefFrom(data)).sort()).toEqual(['name', 'namespace', 'uid']);
  });

  it('tells a run created again under the same name from the old one', () => {
    expect(isSameRun(ref, { ...ref })).toBe(true);
    expect(isSameRun(ref, { ...ref, uid: 'uid-b' })).toBe(false);
    expect(isSameRun(ref, { ...ref, namespace: 'team-b' })).toBe(false);
  });

  it('names a run as namespace/name (uid ...)', () => {
    expect(describeRunRef(ref)).toBe('team-a/run-a (uid uid-a)');
  });
});
