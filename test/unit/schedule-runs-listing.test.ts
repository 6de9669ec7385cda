// What a schedule reconcile keeps of its runs past SCHEDULE_RUNS_KEPT (schedule-runs-listing.ts):
// active runs first, then the newest. Runs planted under the schedule's name (a legacy-style
// name, the schedule's owner reference and labels, a spec the operator refuses so they end
// Failed at once) sorted newer than the run still going and pushed it out of what was kept:
// Forbid saw no active run and started a second one beside it. So did unfinished runs planted
// for a time still to come: they are not kept at all.
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
const NOW = new Date(T + 3_600_000 + 5000);
const run = (name: string, at: number, phase?: string) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: {
    name,
    namespace: 'team',
    uid: `u-${name}`,
    generation: 1,
    creationTimestamp: new Date(at).toISOString(),
    ownerReferences: owner,
    labels: { 'chamvi.dev/schedule': 'nightly', 'chamvi.dev/scheduled-time': String(at / 1000) },
    annotations: { 'chamvi.dev/scheduled-at': new Date(at).toISOString() },
  },
  spec: { task: 'planted' },
  ...(phase ? { status: { phase } } : {}),
});
const making = { spec: schedule.spec, runSpec: { task: 'real', repository: { url: 'x' } } } as unknown as ScheduleMaking;
/** The run the schedule made for time `at`, under the name it gives it. */
const scheduledRun = (at: number, phase?: string) => run(scheduledRunName('nightly', new Date(at)), at, phase);
/** Three finished runs planted under the schedule's name, each newer than T. */
const plantedFailed = () => [1, 2, 3].map((index) => run(`nightly-zzzz${index}`, T + index * 1000, 'Failed'));
/** One page holding `runs`, listed keeping three. */
const listKeepingThree = (runs: object[]) =>
  listRunsOfSchedule({
    kube: { listScheduleRuns: async () => runs as unknown as ScheduleRunPage },
    schedule,
    making,
    now: NOW,
    pageLimit: 10,
    keep: 3,
  });

describe('listRunsOfSchedule past the runs it keeps', () => {
  it('keeps the active run when newer finished runs would fill what it keeps', async () => {
    const going = scheduledRun(T, 'Running');
    const listed = await listKeepingThree([going, ...plantedFailed()]);

    const kept = [...listed.runs, ...listed.foreign].map((each) => each.name);
    expect(kept).toContain(going.metadata.name);
    expect(listed.runs.map((each) => [each.name, each.phase])).toEqual([[going.metadata.name, 'Running']]);
    expect(listed.leftOut).toBe(1);
  });

  it('leaves out runs for a time still to come: unfinished ones planted for 9999 do not push the running run out', async () => {
    const going = scheduledRun(T, 'Running');
    const planted = [1, 2, 3].map((minute) => scheduledRun(Date.UTC(9999, 0, 1, 0, minute), 'Pending'));
    const listed = await listKeepingThree([going, ...planted]);

    expect(listed.runs.map((each) => each.name)).toEqual([going.metadata.name]);
    expect(listed.uids.has(planted[0]!.metadata.name)).toBe(false);
    expect(listed.leftOut).toBe(0);
  });

  it('keeps a run the schedule made that has no phase yet before finished runs planted newer', async () => {
    // Found an hour after it was made (an operator outage): unfinished, it holds the schedule.
    const waiting = scheduledRun(T);
    const listed = await listKeepingThree([waiting, ...plantedFailed()]);

    expect(listed.runs.map((each) => [each.name, each.phase])).toEqual([[waiting.metadata.name, undefined]]);
    expect(listed.leftOut).toBe(1);
  });
});
