// Which runs' changes wake a CodingSchedule's reconcile (controller/schedule-controller.ts). Each
// wake lists every run carrying the schedule's label, ten a page; anyone who may create runs can
// write that label, so a run wakes the schedule only when its controller reference names the
// schedule too.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { scheduleKeyOfRun } from '../../operator/src/controller/schedule-controller.ts';

const run = (labels: Record<string, string>, ownerReferences?: object[]) =>
  ({
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: 'nightly-29935000', namespace: 'team', uid: 'r-1', labels, ...(ownerReferences ? { ownerReferences } : {}) },
    spec: {},
  }) as unknown as CodingRun;

const controller = (fields: object = {}) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingSchedule',
  name: 'nightly',
  uid: 'u-1',
  controller: true,
  ...fields,
});

describe('a change to a run', () => {
  it('wakes the schedule that is its controller and whose label it carries', () => {
    expect(scheduleKeyOfRun(run({ 'chamvi.dev/schedule': 'nightly' }, [controller()]))).toBe('team/nightly');
  });

  it('does not wake a schedule whose label alone it carries', () => {
    expect(scheduleKeyOfRun(run({ 'chamvi.dev/schedule': 'nightly' }))).toBeUndefined();
    expect(scheduleKeyOfRun(run({ 'chamvi.dev/schedule': 'nightly' }, [controller({ controller: false })]))).toBeUndefined();
  });

  it('does not wake a schedule its controller reference does not name as a CodingSchedule', () => {
    const labels = { 'chamvi.dev/schedule': 'nightly' };
    expect(scheduleKeyOfRun(run(labels, [controller({ name: 'weekly' })]))).toBeUndefined();
    expect(scheduleKeyOfRun(run(labels, [controller({ kind: 'CodingEval' })]))).toBeUndefined();
    expect(scheduleKeyOfRun(run(labels, [controller({ apiVersion: 'example.com/v1' })]))).toBeUndefined();
  });

  it('wakes no schedule without the label, whatever its controller (the reconcile would not list it)', () => {
    expect(scheduleKeyOfRun(run({}, [controller()]))).toBeUndefined();
  });
});
