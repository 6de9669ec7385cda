// What a schedule reconcile keeps of its runs past SCHEDULE_RUNS_KEPT (schedule-runs-listing.ts):
// active runs first, then the newest. Runs planted under the schedule's name (a legacy-style
// name, the schedule's owner reference and labels, a spec the operator refuses so they end
// Failed at once) sorted newer than the run still going and pushed it out of what was kept:
// Forbid saw no active run and started a second one beside it.
import { describe, expect, it } from 'vitest';
import type { CodingSchedule } from '../../operator/src/api/coding-schedule.ts';
import { listRunsOfSchedule } from '../../operator/src/controller/schedule-runs-listing.ts';
import type { ScheduleRunPage } from '../../operator/src/kube/schedule-gateway.ts';
import { scheduledRunName } from '../../operator/src/reconcile/names.ts';
import type { ScheduleMaking } from '../../operator/src/reconcile/runs-of-schedule.ts';

const schedule = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingSchedule',
  metadata: { name: 'nightly', namespace: 'team', uid: 'S-UID', generation: 1 },
  spec: { schedule: '0 * * * *', concurrencyPolicy: 'Forbid', runTemplate: { spec: {} } },
} as unknown as CodingSchedule;
const owner = [{ apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingSchedule', name: 'nightly', uid: 'S-UID', controller: true }];
const T = Date.parse('2026-12-07T13:00:00Z');
const run = (name: string, at: number, phase: string) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: {
    name,
    namespace: 'team',
    uid: `u-${name}`,
    generation: 1,
    ownerReferences: owner,
    labels: { 'chamvi.dev/schedule': 'nightly', 'chamvi.dev/scheduled-time': String(at / 1000) },
    annotations: { 'chamvi.dev/scheduled-at': new Date(at).toISOString() },
  },
  spec: { task: 'planted' },
  status: { phase },
});
const making = { spec: schedule.spec, runSpec: { task: 'real', repository: { url: 'x' } } } as unknown as ScheduleMaking;

describe('listRunsOfSchedule past the runs it keeps', () => {
  it('keeps the active run when newer finished runs would fill what it keeps', async () => {
    const going = run(scheduledRunName('nightly', new Date(T)), T, 'Running');
    const planted = [1, 2, 3].map((index) => run(`nightly-zzzz${index}`, T + index * 1000, 'Failed'));
    const page = [going, ...planted] as unknown as ScheduleRunPage;
    const listed = await listRunsOfSchedule({ kube: { listScheduleRuns: async () => page }, schedule, making, pageLimit: 10, keep: 3 });

    const kept = [...listed.runs, ...listed.foreign].map((each) => each.name);
    expect(kept).toContain(going.metadata.name);
    expect(listed.runs.map((each) => [each.name, each.phase])).toEqual([[going.metadata.name, 'Running']]);
    expect(listed.leftOut).toBe(1);
  });
});
