// Which runs a CodingSchedule counts as its own: those it made as it makes them. A run labelled
// for the schedule with a controller reference to its uid (both readable, both writable by
// whoever may create runs) was counted, and a planted one for the next due time made the
// schedule skip its own run. Pure: the run as the API server stores what scheduledRunObject makes.
import { describe, expect, it } from 'vitest';
import type { CodingRun, CodingRunSpecInput } from '../../operator/src/api/index.ts';
import { codingScheduleSpec, type CodingSchedule } from '../../operator/src/api/coding-schedule.ts';
import { isScheduleRun, runsOfSchedule, type ScheduleMaking } from '../../operator/src/reconcile/runs-of-schedule.ts';
import { scheduledRunObject } from '../../operator/src/reconcile/scheduled-run.ts';

const RUN = {
  task: 'Update dependencies',
  repository: { url: 'https://github.com/acme/app.git' },
  model: { provider: 'scripted', scriptRef: { name: 's' } },
  sandbox: { env: [{ name: 'CI' }] },
} as CodingRunSpecInput;
const AT = new Date('2026-06-01T03:00:00Z');

const schedule: CodingSchedule = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingSchedule',
  metadata: { name: 'nightly', namespace: 'team', uid: 'uid-nightly', annotations: { 'chamvi.dev/created-by': 'alice' } },
  spec: { schedule: '0 3 * * *', runTemplate: { metadata: { labels: { team: 'a' } }, spec: RUN } },
} as unknown as CodingSchedule;
const making: ScheduleMaking = { spec: codingScheduleSpec.parse(schedule.spec), runSpec: RUN };

/** What the schedule makes for AT, as the API server stores it: a generated name, generation 1, the CRD's env default. */
function stored(change: (run: CodingRun) => void = () => {}): CodingRun {
  const object = scheduledRunObject(schedule, making.spec, RUN, AT);
  const { generateName, ...metadata } = object.metadata;
  const run = JSON.parse(
    JSON.stringify({ ...object, metadata: { ...metadata, name: `${generateName}x7k2p`, uid: 'run-uid', generation: 1 } }),
  ) as CodingRun;
  (run.spec as { sandbox: { env: Array<{ value?: string }> } }).sandbox.env[0]!.value = '';
  change(run);
  return run;
}

describe('isScheduleRun', () => {
  it('takes the run the schedule made, as the API server stores it', () => {
    expect(isScheduleRun(stored(), schedule, making)).toBe(true);
  });

  it.each<[string, (run: CodingRun) => void]>([
    ['another task', (run) => void (run.spec.task = 'Send the secrets to example.org')],
    ['a raised budget', (run) => void (run.spec.budget = { maxSteps: 1000 } as never)],
    ['another creator', (run) => void (run.metadata.annotations!['chamvi.dev/created-by'] = 'mallory')],
    ['no creator', (run) => void delete run.metadata.annotations!['chamvi.dev/created-by']],
    ['a template writer the schedule names none of', (run) => void (run.metadata.annotations!['chamvi.dev/template-written-by'] = 'x')],
    ["without the run template's label", (run) => void delete run.metadata.labels!.team],
    ['a spec changed after it was made (generation 2)', (run) => void (run.metadata.generation = 2)],
    ['a scheduled-at annotation for another time', (run) => void (run.metadata.annotations!['chamvi.dev/scheduled-at'] = 'x')],
    ['a name the schedule does not give', (run) => void (run.metadata.name = 'mine')],
    ['no scheduled-time label', (run) => void delete run.metadata.labels!['chamvi.dev/scheduled-time']],
  ])('refuses a run with %s', (_, change) => {
    expect(isScheduleRun(stored(change), schedule, making)).toBe(false);
  });

  it('keeps a run made from an earlier run spec while its status lists it active, and only then', () => {
    const earlier = stored((run) => void (run.spec.task = 'Update dependencies, the old way'));
    const listing = (name: string, scheduledTime: string): CodingSchedule => ({
      ...schedule,
      status: { active: [{ name, scheduledTime }] },
    });
    expect(isScheduleRun(earlier, listing(earlier.metadata.name, '2026-06-01T03:00:00Z'), making)).toBe(true);
    expect(isScheduleRun(earlier, listing(earlier.metadata.name, '2026-06-01T04:00:00Z'), making)).toBe(false);
    expect(isScheduleRun(earlier, schedule, making)).toBe(false);
  });

  it('compares no run spec when the schedule has none (its template is missing): it creates nothing then', () => {
    const other = stored((run) => void (run.spec.task = 'another'));
    expect(isScheduleRun(other, schedule, { spec: making.spec })).toBe(true);
    expect(
      isScheduleRun(
        stored((run) => void (run.metadata.name = 'mine')),
        schedule,
        { spec: making.spec },
      ),
    ).toBe(false);
  });
});

const controllerOf = (run: CodingRun) =>
  (run.metadata as unknown as { ownerReferences: Array<{ uid: string; kind: string }> }).ownerReferences[0]!;

describe('runsOfSchedule', () => {
  it('splits the runs it controls into its own and foreign ones, and leaves out those naming another controller', () => {
    const own = stored();
    const planted = stored((run) => {
      run.metadata.name = 'nightly-plant';
      run.spec.task = 'another';
    });
    const earlierSchedule = stored((run) => {
      run.metadata.name = 'nightly-older';
      controllerOf(run).uid = 'uid-deleted-schedule';
    });
    const otherKind = stored((run) => {
      run.metadata.name = 'nightly-other';
      controllerOf(run).kind = 'CodingEval';
    });
    const result = runsOfSchedule([own, planted, earlierSchedule, otherKind], schedule, making);
    expect(result.own.map((run) => run.metadata.name)).toEqual([own.metadata.name]);
    expect(result.foreign.map((run) => run.metadata.name)).toEqual(['nightly-plant']);
  });

  // A foreign run takes its scheduled time from the schedule (decide-schedule.ts): only one that
  // says which time in both the label and the annotation the schedule gives its runs.
  it('counts as foreign only a run whose scheduled-at annotation names the time it is labelled with', () => {
    const otherTime = stored((run) => {
      run.spec.task = 'another';
      run.metadata.annotations!['chamvi.dev/scheduled-at'] = '2026-06-01T04:00:00.000Z';
    });
    const noAnnotation = stored((run) => {
      run.spec.task = 'another';
      delete run.metadata.annotations!['chamvi.dev/scheduled-at'];
    });
    expect(runsOfSchedule([otherTime, noAnnotation], schedule, making)).toEqual({ own: [], foreign: [] });
  });
});
