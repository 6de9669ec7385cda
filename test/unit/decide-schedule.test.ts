// Table tests of what a CodingSchedule does at a given moment: the CronJob semantics (due
// time, missed times, startingDeadlineSeconds, each concurrencyPolicy, suspend, history
// limits), time zones and daylight-saving changes, and the restart case (a run already made
// for the due time). Pure: the real cron parser, an explicit clock, no cluster.
import { describe, expect, it } from 'vitest';
import {
  codingScheduleSpec,
  codingScheduleStatus,
  SCHEDULE_ACTIVE_LISTED,
  type CodingScheduleSpecInput,
  type CodingScheduleStatus,
} from '../../operator/src/api/coding-schedule.ts';
import { parseCronSchedule } from '../../operator/src/reconcile/cron-schedule.ts';
import {
  decideSchedule,
  HELD_HISTORY_RECHECK_MS,
  TEMPLATE_RECHECK_MAX_MS,
  TEMPLATE_RECHECK_MS,
  type ScheduleInput,
  type ScheduleProblem,
  type ScheduledRun,
} from '../../operator/src/reconcile/decide-schedule.ts';

const RUN = {
  task: 'Update dependencies',
  repository: { url: 'https://github.com/acme/app.git' },
  model: { provider: 'scripted', scriptRef: { name: 's' } },
};

interface Row {
  name: string;
  spec?: Partial<CodingScheduleSpecInput>;
  status?: CodingScheduleStatus;
  createdAt?: string;
  runs?: ScheduledRun[];
  /** Runs naming the schedule as their controller that it did not make as it makes them (runs-of-schedule.ts). */
  foreign?: ScheduledRun[];
  now: string;
  problem?: ScheduleInput['problem'];
  expected: {
    create?: string;
    deleted?: string[];
    lastScheduleTime?: string;
    lastMissedTime?: string;
    nextScheduleTime?: string;
    active?: string[];
    events?: string[];
    ready?: string;
  };
}

const iso = (value: string | undefined) => (value ? new Date(value).toISOString() : undefined);

const run = (name: string, scheduledTime: string, phase?: ScheduledRun['phase'], completionTime?: string): ScheduledRun => ({
  name,
  scheduledTime: new Date(scheduledTime),
  ...(phase ? { phase } : {}),
  ...(completionTime ? { completionTime: new Date(completionTime) } : {}),
});

const rows: Row[] = [
  {
    name: 'before the first scheduled time: nothing, and wakes at it',
    spec: { schedule: '0 * * * *' },
    createdAt: '2026-06-01T10:10:00Z',
    now: '2026-06-01T10:30:00Z',
    expected: { nextScheduleTime: '2026-06-01T11:00:00.000Z', events: [], ready: 'Scheduled' },
  },
  {
    name: 'at the scheduled time: one run for it',
    spec: { schedule: '0 * * * *' },
    createdAt: '2026-06-01T10:10:00Z',
    now: '2026-06-01T11:00:00.200Z',
    expected: {
      create: '2026-06-01T11:00:00.000Z',
      lastScheduleTime: '2026-06-01T11:00:00.000Z',
      nextScheduleTime: '2026-06-01T12:00:00.000Z',
    },
  },
  {
    name: 'down for hours without a deadline: one run, for the latest missed time',
    spec: { schedule: '0 * * * *' },
    status: { lastScheduleTime: '2026-06-01T11:00:00Z' },
    now: '2026-06-01T15:20:00Z',
    expected: { create: '2026-06-01T15:00:00.000Z', lastScheduleTime: '2026-06-01T15:00:00.000Z' },
  },
  {
    name: 'a missed time past startingDeadlineSeconds is skipped and reported',
    spec: { schedule: '0 * * * *', startingDeadlineSeconds: 300 },
    status: { lastScheduleTime: '2026-06-01T11:00:00Z' },
    now: '2026-06-01T15:20:00Z',
    expected: {
      lastScheduleTime: '2026-06-01T11:00:00.000Z',
      lastMissedTime: '2026-06-01T15:00:00.000Z',
      events: ['Warning MissedSchedule'],
    },
  },
  {
    name: 'a skipped time is reported once',
    spec: { schedule: '0 * * * *', startingDeadlineSeconds: 300 },
    status: { lastScheduleTime: '2026-06-01T11:00:00Z', lastMissedTime: '2026-06-01T15:00:00Z' },
    now: '2026-06-01T15:21:00Z',
    expected: { lastMissedTime: '2026-06-01T15:00:00.000Z', events: [] },
  },
  {
    name: 'within startingDeadlineSeconds the late run is created',
    spec: { schedule: '0 * * * *', startingDeadlineSeconds: 300 },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    now: '2026-06-01T15:04:59Z',
    expected: { create: '2026-06-01T15:00:00.000Z' },
  },
  {
    name: 'Forbid with an active run: nothing, the time stays due',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Forbid' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [run('nightly-a', '2026-06-01T14:00:00Z', 'Running')],
    now: '2026-06-01T15:00:01Z',
    expected: { lastScheduleTime: '2026-06-01T14:00:00.000Z', active: ['nightly-a'], events: [] },
  },
  {
    name: 'Forbid: a run created before its first status (no phase yet) counts as active',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Forbid' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [run('nightly-a', '2026-06-01T14:00:00Z')],
    now: '2026-06-01T15:00:01Z',
    expected: { lastScheduleTime: '2026-06-01T14:00:00.000Z', active: ['nightly-a'] },
  },
  {
    name: 'Forbid: when the active run ends within the deadline, the held time runs late',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Forbid', startingDeadlineSeconds: 600 },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [run('nightly-a', '2026-06-01T14:00:00Z', 'Succeeded', '2026-06-01T15:07:00Z')],
    now: '2026-06-01T15:07:01Z',
    expected: { create: '2026-06-01T15:00:00.000Z', active: [] },
  },
  {
    name: 'Forbid: when the active run ends past the deadline, the held time is missed',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Forbid', startingDeadlineSeconds: 600 },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [run('nightly-a', '2026-06-01T14:00:00Z', 'Failed')],
    now: '2026-06-01T15:20:00Z',
    expected: { lastMissedTime: '2026-06-01T15:00:00.000Z', events: ['Warning MissedSchedule'] },
  },
  {
    name: 'Allow with an active run: a second run beside it',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Allow' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [run('nightly-a', '2026-06-01T14:00:00Z', 'Running')],
    now: '2026-06-01T15:00:01Z',
    expected: { create: '2026-06-01T15:00:00.000Z', active: ['nightly-a'], deleted: [] },
  },
  {
    name: 'Replace with an active run: it is deleted and the new run created',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Replace' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [run('nightly-a', '2026-06-01T14:00:00Z', 'WaitingForApproval')],
    now: '2026-06-01T15:00:01Z',
    expected: { create: '2026-06-01T15:00:00.000Z', active: [], deleted: ['Replace nightly-a'], events: ['Normal RunReplaced'] },
  },
  {
    name: 'Replace with nothing active: just creates',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Replace' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [run('nightly-a', '2026-06-01T14:00:00Z', 'Succeeded', '2026-06-01T14:30:00Z')],
    now: '2026-06-01T15:00:01Z',
    expected: { create: '2026-06-01T15:00:00.000Z', deleted: [], events: [] },
  },
  {
    name: 'restart between create and status write: the run for the due time is recorded, not made again',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Allow' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [run('nightly-b', '2026-06-01T15:00:00Z')],
    now: '2026-06-01T15:00:03Z',
    expected: { lastScheduleTime: '2026-06-01T15:00:00.000Z', active: ['nightly-b'], events: [] },
  },
  {
    name: 'restart with Replace: the run already made for the due time is not replaced by itself',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Replace' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [run('nightly-b', '2026-06-01T15:00:00Z', 'Running')],
    now: '2026-06-01T15:00:03Z',
    expected: { lastScheduleTime: '2026-06-01T15:00:00.000Z', active: ['nightly-b'], deleted: [] },
  },
  // Were the status write that records it to fail, the next decision would find the time due
  // and no run for it, and make a second run for the time.
  {
    name: 'restart, history limit 0: the finished run for the due time is recorded, and kept until the status holds its time',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Allow', successfulRunsHistoryLimit: 0 },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [
      run('nightly-a', '2026-06-01T14:00:00Z', 'Succeeded', '2026-06-01T14:10:00Z'),
      run('nightly-b', '2026-06-01T15:00:00Z', 'Succeeded', '2026-06-01T15:02:00Z'),
    ],
    now: '2026-06-01T15:03:00Z',
    expected: { lastScheduleTime: '2026-06-01T15:00:00.000Z', deleted: ['History nightly-a'], active: [] },
  },
  {
    name: 'history limit 0, the time recorded: the run for it goes',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Allow', successfulRunsHistoryLimit: 0 },
    status: { lastScheduleTime: '2026-06-01T15:00:00Z' },
    runs: [run('nightly-b', '2026-06-01T15:00:00Z', 'Succeeded', '2026-06-01T15:02:00Z')],
    now: '2026-06-01T15:03:01Z',
    expected: { deleted: ['History nightly-b'] },
  },
  {
    name: 'suspended: nothing created, no next time',
    spec: { schedule: '0 * * * *', suspend: true },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    now: '2026-06-01T15:00:01Z',
    expected: { lastScheduleTime: '2026-06-01T14:00:00.000Z', nextScheduleTime: undefined, ready: 'Suspended' },
  },
  {
    name: 'resumed within the deadline: the time missed while suspended runs',
    spec: { schedule: '0 * * * *', suspend: false, startingDeadlineSeconds: 3600 },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    now: '2026-06-01T15:30:00Z',
    expected: { create: '2026-06-01T15:00:00.000Z' },
  },
  {
    name: 'history: finished runs past the limits go, oldest first; active runs stay',
    spec: { schedule: '0 * * * *', successfulRunsHistoryLimit: 2, failedRunsHistoryLimit: 1 },
    status: { lastScheduleTime: '2026-06-01T15:00:00Z' },
    runs: [
      run('s1', '2026-06-01T08:00:00Z', 'Succeeded', '2026-06-01T08:10:00Z'),
      run('s2', '2026-06-01T09:00:00Z', 'Succeeded', '2026-06-01T09:10:00Z'),
      run('s3', '2026-06-01T10:00:00Z', 'Succeeded', '2026-06-01T10:10:00Z'),
      run('f1', '2026-06-01T11:00:00Z', 'Failed'),
      run('c1', '2026-06-01T12:00:00Z', 'Cancelled'),
      run('f2', '2026-06-01T13:00:00Z', 'Failed'),
      run('a1', '2026-06-01T15:00:00Z', 'Running'),
    ],
    now: '2026-06-01T15:10:00Z',
    expected: { deleted: ['History s1', 'History c1', 'History f1'], active: ['a1'] },
  },
  {
    name: 'history limit 0 deletes every finished run',
    spec: { schedule: '0 * * * *', successfulRunsHistoryLimit: 0, failedRunsHistoryLimit: 0 },
    status: { lastScheduleTime: '2026-06-01T15:00:00Z' },
    runs: [run('s1', '2026-06-01T08:00:00Z', 'Succeeded', '2026-06-01T08:10:00Z'), run('f1', '2026-06-01T11:00:00Z', 'Failed')],
    now: '2026-06-01T15:10:00Z',
    expected: { deleted: ['History s1', 'History f1'] },
  },
  {
    name: 'time zone: 09:00 in Berlin is 08:00 UTC in winter',
    spec: { schedule: '0 9 * * *', timeZone: 'Europe/Berlin' },
    status: { lastScheduleTime: '2026-01-14T08:00:00Z' },
    now: '2026-01-15T08:00:30Z',
    expected: { create: '2026-01-15T08:00:00.000Z', nextScheduleTime: '2026-01-16T08:00:00.000Z' },
  },
  {
    name: 'time zone: 09:00 in Berlin is 07:00 UTC in summer, and 08:00 UTC is not due',
    spec: { schedule: '0 9 * * *', timeZone: 'Europe/Berlin' },
    status: { lastScheduleTime: '2026-07-15T07:00:00Z' },
    now: '2026-07-15T08:00:30Z',
    expected: { nextScheduleTime: '2026-07-16T07:00:00.000Z' },
  },
  {
    name: 'DST spring forward: 02:30 does not exist in Berlin on 29 March; it runs at 03:00 CEST',
    spec: { schedule: '30 2 * * *', timeZone: 'Europe/Berlin' },
    status: { lastScheduleTime: '2026-03-28T01:30:00Z' },
    now: '2026-03-29T01:00:10Z',
    expected: { create: '2026-03-29T01:00:00.000Z', nextScheduleTime: '2026-03-30T00:30:00.000Z' },
  },
  {
    name: 'DST fall back: 02:30 happens twice in Berlin on 25 October; the second is not a new run',
    spec: { schedule: '30 2 * * *', timeZone: 'Europe/Berlin' },
    status: { lastScheduleTime: '2026-10-25T00:30:00Z' },
    now: '2026-10-25T01:30:10Z',
    expected: { nextScheduleTime: '2026-10-26T01:30:00.000Z' },
  },
  {
    name: 'DST fall back with two times in the repeated hour: 01:00 and 01:30 each run once in New York on 1 November',
    spec: { schedule: '0,30 1 * * *', timeZone: 'America/New_York' },
    // 01:30 EDT ran; 01:00 EST (06:00Z) is 01:00 again, not a new time.
    status: { lastScheduleTime: '2026-11-01T05:30:00Z' },
    now: '2026-11-01T06:00:30Z',
    expected: { nextScheduleTime: '2026-11-02T06:00:00.000Z' },
  },
  // croner moved a skipped time past the gap only when the minute and the hour were single
  // values: with a list or a range the time was dropped.
  {
    name: 'DST spring forward, two times in the gap: 02:00 and 02:30 in Berlin make one run at 03:00 CEST',
    spec: { schedule: '0,30 2 * * *', timeZone: 'Europe/Berlin' },
    status: { lastScheduleTime: '2026-03-28T01:30:00Z' },
    now: '2026-03-29T01:00:30Z',
    expected: { create: '2026-03-29T01:00:00.000Z', nextScheduleTime: '2026-03-30T00:00:00.000Z' },
  },
  {
    name: 'DST spring forward, two times in the gap: the one run made, nothing more that day',
    spec: { schedule: '0,30 2 * * *', timeZone: 'Europe/Berlin' },
    status: { lastScheduleTime: '2026-03-29T01:00:00Z' },
    now: '2026-03-29T12:00:00Z',
    expected: { nextScheduleTime: '2026-03-30T00:00:00.000Z' },
  },
  {
    name: 'DST spring forward, a list of hours: 02:00 in Berlin runs at 03:00 CEST, and 14:00 still runs',
    spec: { schedule: '0 2,14 * * *', timeZone: 'Europe/Berlin' },
    status: { lastScheduleTime: '2026-03-28T13:00:00Z' },
    now: '2026-03-29T01:00:30Z',
    expected: { create: '2026-03-29T01:00:00.000Z', nextScheduleTime: '2026-03-29T12:00:00.000Z' },
  },
  {
    name: 'DST spring forward, every hour: 02:05 in Berlin is not made up at 03:00 CEST; 03:05 CEST is next',
    spec: { schedule: '5 * * * *', timeZone: 'Europe/Berlin' },
    status: { lastScheduleTime: '2026-03-29T00:05:00Z' },
    now: '2026-03-29T01:00:30Z',
    expected: { nextScheduleTime: '2026-03-29T01:05:00.000Z' },
  },
  // An hourly schedule runs once an hour of real time: the repeated 01:00 (EST, 06:00Z) made nothing.
  {
    name: 'DST fall back, every hour: 01:00 EST in New York runs, after 01:00 EDT',
    spec: { schedule: '0 * * * *', timeZone: 'America/New_York' },
    status: { lastScheduleTime: '2026-11-01T05:00:00Z' },
    now: '2026-11-01T06:00:30Z',
    expected: { create: '2026-11-01T06:00:00.000Z', nextScheduleTime: '2026-11-01T07:00:00.000Z' },
  },
  {
    name: 'America/New_York daily at midnight, DST fall back day',
    spec: { schedule: '0 0 * * *', timeZone: 'America/New_York' },
    status: { lastScheduleTime: '2026-10-31T04:00:00Z' },
    now: '2026-11-01T04:00:05Z',
    expected: { create: '2026-11-01T04:00:00.000Z', nextScheduleTime: '2026-11-02T05:00:00.000Z' },
  },
  {
    name: 'a template that is missing: nothing created, Ready False, one Warning',
    spec: { schedule: '0 * * * *' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    now: '2026-06-01T15:00:01Z',
    problem: { reason: 'TemplateNotFound', message: 'CodingRunTemplate t does not exist' },
    expected: {
      lastScheduleTime: '2026-06-01T14:00:00.000Z',
      ready: 'TemplateNotFound',
      events: ['Warning TemplateNotFound'],
      nextScheduleTime: undefined,
    },
  },
  {
    name: 'the same problem again: no second Warning',
    spec: { schedule: '0 * * * *' },
    status: {
      lastScheduleTime: '2026-06-01T14:00:00Z',
      conditions: [
        {
          type: 'Ready',
          status: 'False',
          reason: 'TemplateNotFound',
          message: 'CodingRunTemplate t does not exist',
          lastTransitionTime: '2026-06-01T14:30:00Z',
        },
      ],
    },
    now: '2026-06-01T15:00:01Z',
    problem: { reason: 'TemplateNotFound', message: 'CodingRunTemplate t does not exist' },
    expected: { ready: 'TemplateNotFound', events: [] },
  },
  {
    name: 'runs being deleted are neither active nor history',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Forbid', successfulRunsHistoryLimit: 0 },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [
      { ...run('gone-a', '2026-06-01T14:00:00Z', 'Running'), deleting: true },
      { ...run('gone-b', '2026-06-01T13:00:00Z', 'Succeeded'), deleting: true },
    ],
    now: '2026-06-01T15:00:01Z',
    expected: { create: '2026-06-01T15:00:00.000Z', active: [], deleted: [] },
  },
  // A foreign run may be the schedule's own, made before its spec was edited and before a status
  // write that was lost: a second run for its time ran beside it. It takes that time, and is
  // not counted (anyone who may create runs can plant one).
  {
    name: 'a foreign run for the time due: the time is taken, nothing is created or counted, and a warning says so',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Allow' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    foreign: [run('made-before-an-edit', '2026-06-01T15:00:00Z', 'Running')],
    now: '2026-06-01T15:00:01Z',
    expected: { lastScheduleTime: '2026-06-01T15:00:00.000Z', active: [], events: ['Warning ForeignRun'] },
  },
  // Nor does it run beside a later one: Forbid started the next time while it ran, and Replace
  // left it running beside the new run.
  {
    name: 'Forbid: an active foreign run for an earlier time holds the next one (it may be the schedule’s own)',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Forbid' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    foreign: [run('made-before-an-edit', '2026-06-01T14:00:00Z', 'Running')],
    now: '2026-06-01T15:00:01Z',
    expected: { lastScheduleTime: '2026-06-01T14:00:00.000Z', active: [], deleted: [], events: [] },
  },
  {
    name: 'Forbid: a foreign run not yet started (no phase) holds the next one too',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Forbid' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    foreign: [run('made-before-an-edit', '2026-06-01T14:00:00Z')],
    now: '2026-06-01T15:00:01Z',
    expected: { lastScheduleTime: '2026-06-01T14:00:00.000Z' },
  },
  {
    name: 'Forbid: a finished foreign run holds nothing, and is no history the schedule deletes',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Forbid', failedRunsHistoryLimit: 0 },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    foreign: [run('made-before-an-edit', '2026-06-01T14:00:00Z', 'Failed')],
    now: '2026-06-01T15:00:01Z',
    expected: { create: '2026-06-01T15:00:00.000Z', active: [], deleted: [] },
  },
  {
    name: 'Replace: an active foreign run is deleted with the active runs, and the new run created',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Replace' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    runs: [run('nightly-a', '2026-06-01T13:00:00Z', 'Running')],
    foreign: [run('made-before-an-edit', '2026-06-01T14:00:00Z', 'Running')],
    now: '2026-06-01T15:00:01Z',
    expected: {
      create: '2026-06-01T15:00:00.000Z',
      active: [],
      deleted: ['Replace nightly-a', 'Replace made-before-an-edit'],
      events: ['Normal RunReplaced', 'Normal RunReplaced'],
    },
  },
  {
    name: 'Forbid: a foreign run being deleted holds nothing',
    spec: { schedule: '0 * * * *', concurrencyPolicy: 'Forbid' },
    status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
    foreign: [{ ...run('made-before-an-edit', '2026-06-01T14:00:00Z', 'Running'), deleting: true }],
    now: '2026-06-01T15:00:01Z',
    expected: { create: '2026-06-01T15:00:00.000Z' },
  },
];

/**
 * An hourly schedule with `problem` (so no cron, nothing to create), first looked at ten
 * minutes after it was made: for the tests of what a problem's message becomes in status.
 */
function problemInput(problem: ScheduleProblem): Omit<ScheduleInput, 'status'> & { problem: ScheduleProblem } {
  return {
    spec: codingScheduleSpec.parse({ schedule: '0 * * * *', runTemplate: { spec: RUN } }),
    generation: 1,
    createdAt: new Date('2026-06-01T09:30:00Z'),
    cron: undefined,
    runs: [],
    now: new Date('2026-06-01T09:40:00Z'),
    problem,
  };
}

describe('decideSchedule', () => {
  it.each(rows)('$name', (row) => {
    const spec = codingScheduleSpec.parse({ runTemplate: { spec: RUN }, ...row.spec });
    const parsed = parseCronSchedule(spec.schedule, spec.timeZone);
    if (!parsed.ok) throw new Error(parsed.message);
    const decision = decideSchedule({
      spec,
      status: row.status,
      generation: 1,
      createdAt: new Date(row.createdAt ?? '2026-01-01T00:00:00Z'),
      cron: parsed.schedule,
      ...(row.problem ? { problem: row.problem } : {}),
      runs: row.runs ?? [],
      ...(row.foreign ? { foreign: row.foreign } : {}),
      now: new Date(row.now),
    });
    const { expected } = row;
    expect(decision.create?.toISOString()).toBe(expected.create);
    if ('lastScheduleTime' in expected) expect(iso(decision.status.lastScheduleTime)).toBe(expected.lastScheduleTime);
    if (!expected.create && !('lastScheduleTime' in expected))
      expect(iso(decision.status.lastScheduleTime)).toBe(iso(row.status?.lastScheduleTime));
    if ('lastMissedTime' in expected) expect(iso(decision.status.lastMissedTime)).toBe(expected.lastMissedTime);
    if ('nextScheduleTime' in expected) expect(iso(decision.status.nextScheduleTime)).toBe(expected.nextScheduleTime);
    if (expected.active) expect(decision.status.active?.map((active) => active.name)).toEqual(expected.active);
    if (expected.active) expect(decision.status.activeCount).toBe(expected.active.length);
    if (expected.deleted) expect(decision.deleteRuns.map((run) => `${run.because} ${run.name}`)).toEqual(expected.deleted);
    if (expected.events) expect(decision.events.map((event) => `${event.type} ${event.reason}`)).toEqual(expected.events);
    if (expected.ready) expect(decision.status.conditions?.find((condition) => condition.type === 'Ready')?.reason).toBe(expected.ready);
  });

  it('wakes at the next scheduled time', () => {
    const spec = codingScheduleSpec.parse({ schedule: '*/15 * * * *', runTemplate: { spec: RUN } });
    const parsed = parseCronSchedule(spec.schedule);
    if (!parsed.ok) throw new Error(parsed.message);
    const decision = decideSchedule({
      spec,
      status: { lastScheduleTime: '2026-06-01T10:00:00Z' },
      generation: 1,
      createdAt: new Date('2026-06-01T09:00:00Z'),
      cron: parsed.schedule,
      runs: [],
      now: new Date('2026-06-01T10:05:00Z'),
    });
    expect(decision.requeueAfterMs).toBe(10 * 60_000);
  });

  // Nothing watches templates: without a wake of its own, a schedule applied before its
  // template (or whose template was fixed) waited for an edit or a restart.
  it.each([
    ['TemplateNotFound', 'CodingRunTemplate t does not exist', TEMPLATE_RECHECK_MS],
    ['InvalidRunSpec', 'spec.task: Required', TEMPLATE_RECHECK_MS],
    ['InvalidSchedule', 'not a cron expression', undefined],
  ] as const)('looks again at a schedule whose problem is %s (%s) after %s ms', (reason, message, requeueAfterMs) => {
    const spec = codingScheduleSpec.parse({ schedule: '0 * * * *', runTemplate: { spec: RUN } });
    const parsed = parseCronSchedule(spec.schedule);
    if (!parsed.ok) throw new Error(parsed.message);
    const decision = decideSchedule({
      spec,
      status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
      generation: 1,
      createdAt: new Date('2026-06-01T09:00:00Z'),
      cron: parsed.schedule,
      problem: { reason, message },
      runs: [],
      now: new Date('2026-06-01T15:00:01Z'),
    });
    expect(decision.create).toBeUndefined();
    expect(decision.requeueAfterMs).toBe(requeueAfterMs);
  });

  it('looks again within a second at a run it kept past the history limits, to delete it once its time is recorded', () => {
    const spec = codingScheduleSpec.parse({ schedule: '0 * * * *', successfulRunsHistoryLimit: 0, runTemplate: { spec: RUN } });
    const parsed = parseCronSchedule(spec.schedule);
    if (!parsed.ok) throw new Error(parsed.message);
    const decision = decideSchedule({
      spec,
      status: { lastScheduleTime: '2026-06-01T14:00:00Z' },
      generation: 1,
      createdAt: new Date('2026-06-01T09:00:00Z'),
      cron: parsed.schedule,
      runs: [run('nightly-b', '2026-06-01T15:00:00Z', 'Succeeded', '2026-06-01T15:02:00Z')],
      now: new Date('2026-06-01T15:03:00Z'),
    });
    expect(decision.deleteRuns).toEqual([]);
    expect(decision.requeueAfterMs).toBe(HELD_HISTORY_RECHECK_MS);
  });

  // 10 000 schedules naming a template that never comes, each looked at every 30 s (three reads
  // of the API server, a list among them), kept the shared reconcile loop busy.
  it('looks again at the same template problem less often each time, doubling from 30 s to 10 minutes', () => {
    const spec = codingScheduleSpec.parse({ schedule: '0 * * * *', runTemplate: { spec: RUN } });
    const parsed = parseCronSchedule(spec.schedule);
    if (!parsed.ok) throw new Error(parsed.message);
    const waits = [0, 1, 2, 3, 4, 5, 6, 50].map(
      (problemRepeats) =>
        decideSchedule({
          spec,
          status: undefined,
          generation: 1,
          createdAt: new Date('2026-06-01T09:00:00Z'),
          cron: parsed.schedule,
          problem: { reason: 'TemplateNotFound', message: 'CodingRunTemplate t does not exist' },
          problemRepeats,
          runs: [],
          now: new Date('2026-06-01T15:00:01Z'),
        }).requeueAfterMs,
    );
    expect(waits).toEqual([30_000, 60_000, 120_000, 240_000, 480_000, 600_000, 600_000, 600_000]);
    expect(TEMPLATE_RECHECK_MAX_MS).toBe(600_000);
  });

  // status.active may hold 1000 entries (the CRD): past that every status write got a 422, and
  // lastScheduleTime, nextScheduleTime and the conditions stopped moving while runs were made.
  it(`lists the newest ${SCHEDULE_ACTIVE_LISTED} active runs when more are active, and counts them all`, () => {
    const spec = codingScheduleSpec.parse({ schedule: '* * * * *', concurrencyPolicy: 'Allow', runTemplate: { spec: RUN } });
    const parsed = parseCronSchedule(spec.schedule);
    if (!parsed.ok) throw new Error(parsed.message);
    const start = Date.parse('2026-06-01T00:00:00Z');
    const piled = Array.from({ length: SCHEDULE_ACTIVE_LISTED + 5 }, (_, index) =>
      run(`r${index}`, new Date(start + index * 60_000).toISOString(), 'Pending'),
    );
    const decision = decideSchedule({
      spec,
      status: { lastScheduleTime: new Date(start + (piled.length - 1) * 60_000).toISOString() },
      generation: 1,
      createdAt: new Date(start - 60_000),
      cron: parsed.schedule,
      runs: piled,
      now: new Date(start + (piled.length - 1) * 60_000 + 1_000),
    });
    expect(decision.status.activeCount).toBe(SCHEDULE_ACTIVE_LISTED + 5);
    expect(decision.status.active).toHaveLength(SCHEDULE_ACTIVE_LISTED);
    expect(decision.status.active![0]!.name).toBe('r5');
    expect(decision.status.active!.at(-1)!.name).toBe(`r${SCHEDULE_ACTIVE_LISTED + 4}`);
    expect(codingScheduleStatus.safeParse(decision.status).success).toBe(true);
  });

  it('keeps the Ready transition time while only the next due time in its message changes', () => {
    const spec = codingScheduleSpec.parse({ schedule: '0 * * * *', runTemplate: { spec: RUN } });
    const parsed = parseCronSchedule(spec.schedule);
    if (!parsed.ok) throw new Error(parsed.message);
    const input = {
      spec,
      generation: 1,
      createdAt: new Date('2026-06-01T09:30:00Z'),
      cron: parsed.schedule,
      runs: [],
    };
    const first = decideSchedule({ ...input, status: undefined, now: new Date('2026-06-01T09:40:00Z') });
    const second = decideSchedule({ ...input, status: first.status, now: new Date('2026-06-01T10:00:01Z') });
    expect(second.status.conditions?.[0]?.lastTransitionTime).toBe('2026-06-01T09:40:00Z');
    expect(second.status.conditions?.[0]?.message).toContain('11:00');
  });

  // A message over the CRD's maxLength made the API server refuse the whole status write: the
  // schedule kept saying Ready True, and the reconcile failed at every retry.
  it('keeps a problem message within the condition maxLength, and warns once for it', () => {
    const input = problemInput({ reason: 'InvalidSchedule', message: `spec.x: ${'\u{1F600}'.repeat(20_000)}` });
    const first = decideSchedule({ ...input, status: undefined });
    expect(codingScheduleStatus.safeParse(first.status).success).toBe(true);
    const message = first.status.conditions![0]!.message;
    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(32_768);
    expect(message).toMatch(/\u{1F600}$/u);
    expect(first.events.map((event) => event.reason)).toEqual(['InvalidSchedule']);
    expect(decideSchedule({ ...input, status: first.status }).events).toEqual([]);
  });

  // RunRefused carries the API server's or an admission webhook's words; kubectl describe, Argo
  // CD and Flux print a condition's message as it is, so a newline forged a line of its own.
  it("writes a problem's message in the Ready condition on one line, its hidden characters spelled out, and warns once for it", () => {
    const input = problemInput({ reason: 'RunRefused', message: 'denied the request: no\n\u001b]0;owned\u0007\n  Ready:\tTrue\n\u202e' });
    const first = decideSchedule({ ...input, status: undefined });
    const message = first.status.conditions![0]!.message;
    expect(message).toBe('denied the request: no^J^[]0;owned^G^J  Ready:^ITrue^J<U+202E>');
    expect(first.events.map((event) => event.reason)).toEqual(['RunRefused']);
    expect(decideSchedule({ ...input, status: first.status }).events).toEqual([]);
    expect(decideSchedule({ ...input, status: first.status }).status).toEqual(first.status);
    // As an operator before this one stored it, raw: the same problem, no second Warning.
    const stored = { conditions: [{ ...first.status.conditions![0]!, message: input.problem.message }] };
    expect(decideSchedule({ ...input, status: stored }).events).toEqual([]);
  });

  it('keeps an escaped problem message within the condition maxLength in bytes, never cutting a spelling', () => {
    const input = problemInput({ reason: 'InvalidSchedule', message: `spec.x: ${'\u{1F600}\u202e'.repeat(20_000)}` });
    const first = decideSchedule({ ...input, status: undefined });
    expect(codingScheduleStatus.safeParse(first.status).success).toBe(true);
    const message = first.status.conditions![0]!.message;
    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(32_768);
    expect(message).toMatch(/^spec\.x: (\u{1F600}<U\+202E>)+\u{1F600}?$/u);
    expect(decideSchedule({ ...input, status: first.status }).events).toEqual([]);
  });
});

describe('parseCronSchedule', () => {
  it.each([
    ['* * * *', 'not a cron expression'],
    ['61 * * * *', 'not a cron expression'],
    ['0 0 31 2 *', 'never matches a date'],
  ])('refuses %s', (expression, message) => {
    const parsed = parseCronSchedule(expression);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.message).toContain(message);
  });

  it('refuses a time zone that is not an IANA name', () => {
    const parsed = parseCronSchedule('0 * * * *', 'Mars/Olympus');
    expect(parsed).toEqual({ ok: false, message: expect.stringContaining('Mars/Olympus') as string });
  });

  it('reads day-of-month and day-of-week as cron does (either matches)', () => {
    const parsed = parseCronSchedule('0 0 13 * 5');
    if (!parsed.ok) throw new Error(parsed.message);
    expect(parsed.schedule.nextAfter(new Date('2026-01-01T00:00:00Z'))?.toISOString()).toBe('2026-01-02T00:00:00.000Z');
  });
});
