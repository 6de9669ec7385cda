// Which runs a CodingSchedule counts as its own: those under the name it gives their time and
// naming it as their controller, whatever their spec (a run made before an edit of the schedule,
// whose status write was lost, was foreign, and Forbid started a second run beside it); and runs
// an earlier operator made under generated names, judged as then: made as the schedule makes
// them. Pure: the run as the API server stores what scheduledRunObject makes.
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

/** What the schedule makes for AT, as the API server stores it: generation 1, the CRD's env default. */
function stored(change: (run: CodingRun) => void = () => {}): CodingRun {
  const object = scheduledRunObject(schedule, making.spec, RUN, AT);
  const run = JSON.parse(JSON.stringify({ ...object, metadata: { ...object.metadata, uid: 'run-uid', generation: 1 } })) as CodingRun;
  (run.spec as { sandbox: { env: Array<{ value?: string }> } }).sandbox.env[0]!.value = '';
  change(run);
  return run;
}

/** As an operator before named runs made it: under a name the API server generated from `nightly-`. */
const legacy = (change: (run: CodingRun) => void = () => {}) =>
  stored((run) => {
    run.metadata.name = 'nightly-x7k2p';
    change(run);
  });

const controllerOf = (run: CodingRun) =>
  (run.metadata as unknown as { ownerReferences: Array<{ uid: string; kind: string; apiVersion: string }> }).ownerReferences[0]!;

describe('isScheduleRun', () => {
  it('takes the run the schedule made, as the API server stores it, under its name for the time', () => {
    expect(stored().metadata.name).toBe('nightly-29671380');
    expect(isScheduleRun(stored(), schedule, making)).toBe(true);
  });

  // The hole: made, its status write lost (a 409 from the edit itself), then the schedule edited.
  it.each<[string, (run: CodingRun) => void]>([
    ['another task (the schedule edited since)', (run) => void (run.spec.task = 'Update dependencies, the old way')],
    ['another creator (edited by another author since)', (run) => void (run.metadata.annotations!['chamvi.dev/created-by'] = 'bob')],
    ["without the run template's label (removed from the schedule since)", (run) => void delete run.metadata.labels!.team],
    ['a spec changed after it was made (generation 2)', (run) => void (run.metadata.generation = 2)],
  ])('takes a run under its name and controlled by it whatever it was made with: %s', (_, change) => {
    expect(isScheduleRun(stored(change), schedule, making)).toBe(true);
  });

  it.each<[string, (run: CodingRun) => void]>([
    ['no controller reference', (run) => void ((run.metadata as unknown as { ownerReferences: unknown[] }).ownerReferences = [])],
    ['another schedule of the name as its controller (an earlier uid)', (run) => void (controllerOf(run).uid = 'uid-deleted-schedule')],
    ['a controller of another kind', (run) => void (controllerOf(run).kind = 'CodingEval')],
    ['a controller of another group', (run) => void (controllerOf(run).apiVersion = 'example.org/v1')],
    ["another schedule's label", (run) => void (run.metadata.labels!['chamvi.dev/schedule'] = 'weekly')],
    [
      'a scheduled-time label for another time than its name',
      (run) => void (run.metadata.labels!['chamvi.dev/scheduled-time'] = '1780286400'),
    ],
    [
      'a scheduled-time label 30 s off the minute its name holds',
      (run) => void (run.metadata.labels!['chamvi.dev/scheduled-time'] = '1780282830'),
    ],
    ['no scheduled-time label', (run) => void delete run.metadata.labels!['chamvi.dev/scheduled-time']],
    ['a name the schedule does not give', (run) => void (run.metadata.name = 'nightly-plant-29671380')],
    ['another namespace', (run) => void (run.metadata.namespace = 'other')],
  ])('refuses a run with %s', (_, change) => {
    expect(isScheduleRun(stored(change), schedule, making)).toBe(false);
  });
});

// The upgrade path: runs an earlier operator made with generateName are judged as they were then.
describe('isScheduleRun for a run under a generated name', () => {
  it('takes one made as the schedule makes it', () => {
    expect(isScheduleRun(legacy(), schedule, making)).toBe(true);
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
    ['a name the API server did not generate for the schedule', (run) => void (run.metadata.name = 'mine')],
    ['a generated suffix longer than 5 characters', (run) => void (run.metadata.name = 'nightly-x7k2pq')],
    ['no scheduled-time label', (run) => void delete run.metadata.labels!['chamvi.dev/scheduled-time']],
  ])('refuses a run with %s', (_, change) => {
    expect(isScheduleRun(legacy(change), schedule, making)).toBe(false);
  });

  it('keeps a run made from an earlier run spec while its status lists it active, and only then', () => {
    const earlier = legacy((run) => void (run.spec.task = 'Update dependencies, the old way'));
    const listing = (name: string, scheduledTime: string): CodingSchedule => ({
      ...schedule,
      status: { active: [{ name, scheduledTime }] },
    });
    expect(isScheduleRun(earlier, listing(earlier.metadata.name, '2026-06-01T03:00:00Z'), making)).toBe(true);
    expect(isScheduleRun(earlier, listing(earlier.metadata.name, '2026-06-01T04:00:00Z'), making)).toBe(false);
    expect(isScheduleRun(earlier, schedule, making)).toBe(false);
  });

  it('compares no run spec when the schedule has none (its template is missing): it creates nothing then', () => {
    const other = legacy((run) => void (run.spec.task = 'another'));
    expect(isScheduleRun(other, schedule, { spec: making.spec })).toBe(true);
    expect(
      isScheduleRun(
        legacy((run) => void (run.metadata.name = 'mine')),
        schedule,
        { spec: making.spec },
      ),
    ).toBe(false);
  });
});

describe('runsOfSchedule', () => {
  it('splits the runs it controls into its own and foreign ones, and leaves out those naming another controller', () => {
    const own = stored();
    // Made before the schedule was edited, its status write lost: still its own, by name and controller.
    const madeBeforeAnEdit = stored((run) => {
      run.metadata.name = 'nightly-29671320';
      run.metadata.labels!['chamvi.dev/scheduled-time'] = '1780279200';
      run.metadata.annotations!['chamvi.dev/scheduled-at'] = '2026-06-01T02:00:00.000Z';
      run.spec.task = 'Update dependencies, the old way';
    });
    const legacyOwn = legacy();
    // A generated name: it may be the schedule's, made by an earlier operator before an edit.
    const legacyForeign = legacy((run) => {
      run.metadata.name = 'nightly-plant';
      run.spec.task = 'another';
    });
    // A name neither this operator nor an earlier one gives: not the schedule's, and it takes nothing.
    const plantedElsewhere = stored((run) => void (run.metadata.name = 'nightly-planted-by-hand'));
    const earlierSchedule = stored((run) => void (controllerOf(run).uid = 'uid-deleted-schedule'));
    const otherKind = legacy((run) => void (controllerOf(run).kind = 'CodingEval'));
    const result = runsOfSchedule(
      [own, madeBeforeAnEdit, legacyOwn, legacyForeign, plantedElsewhere, earlierSchedule, otherKind],
      schedule,
      making,
    );
    expect(result.own.map((run) => run.metadata.name)).toEqual(['nightly-29671380', 'nightly-29671320', 'nightly-x7k2p']);
    expect(result.foreign.map((run) => run.metadata.name)).toEqual(['nightly-plant']);
  });

  // A foreign run takes its scheduled time from the schedule (decide-schedule.ts): only one that
  // says which time in both the label and the annotation the schedule gives its runs.
  it('counts as foreign only a run whose scheduled-at annotation names the time it is labelled with', () => {
    const otherTime = legacy((run) => {
      run.spec.task = 'another';
      run.metadata.annotations!['chamvi.dev/scheduled-at'] = '2026-06-01T04:00:00.000Z';
    });
    const noAnnotation = legacy((run) => {
      run.spec.task = 'another';
      delete run.metadata.annotations!['chamvi.dev/scheduled-at'];
    });
    expect(runsOfSchedule([otherTime, noAnnotation], schedule, making)).toEqual({ own: [], foreign: [] });
  });
});
