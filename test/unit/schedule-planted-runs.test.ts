// Runs planted under a CodingSchedule's name by someone who may create CodingRuns in its
// namespace: the name, the labels and the controller reference to the schedule's uid can all be
// worked out ahead (docs/schedules.md). Such a run takes its own time, and may be deleted by
// Replace and the history limits; it must do nothing more. Here: a run labelled for a time still
// to come (it stayed the newest history for ever, and every run the schedule made was deleted as
// history as it ended), a run for a past minute that is none of the cron's times (the same, for
// 03:01-03:03), and, a known limit, a run that never gets a phase (too large for any status
// write): it holds a Forbid schedule until it is deleted. Pure: the real cron parser, an explicit
// clock.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { codingScheduleSpec, type CodingScheduleSpecInput } from '../../operator/src/api/coding-schedule.ts';
import { parseCronSchedule } from '../../operator/src/reconcile/cron-schedule.ts';
import {
  decideSchedule,
  SCHEDULED_TIME_CLOCK_SKEW_MS,
  type ScheduleDecision,
  type ScheduledRun,
} from '../../operator/src/reconcile/decide-schedule.ts';
import { scheduledRunName } from '../../operator/src/reconcile/names.ts';
import { scheduledTimeLabelValue, toScheduledRun } from '../../operator/src/reconcile/scheduled-run.ts';

const RUN = {
  task: 'Update dependencies',
  repository: { url: 'https://github.com/acme/app.git' },
  model: { provider: 'scripted', scriptRef: { name: 's' } },
};

const NOW = new Date('2026-12-07T10:00:00Z');

/** The nightly schedule (03:00 UTC) as of NOW, its 12-07 run made and recorded. */
function decide(options: {
  spec?: Partial<CodingScheduleSpecInput>;
  lastScheduleTime?: string;
  runs?: ScheduledRun[];
  foreign?: ScheduledRun[];
  now?: Date;
}): ScheduleDecision {
  const spec = codingScheduleSpec.parse({ schedule: '0 3 * * *', runTemplate: { spec: RUN }, ...options.spec });
  const parsed = parseCronSchedule(spec.schedule, spec.timeZone);
  if (!parsed.ok) throw new Error(parsed.message);
  return decideSchedule({
    spec,
    status: { lastScheduleTime: options.lastScheduleTime ?? '2026-12-07T03:00:00Z' },
    generation: 1,
    createdAt: new Date('2026-01-01T00:00:00Z'),
    cron: parsed.schedule,
    runs: options.runs ?? [],
    ...(options.foreign ? { foreign: options.foreign } : {}),
    now: options.now ?? NOW,
  });
}

const run = (at: Date, fields: Partial<ScheduledRun> = {}): ScheduledRun => ({
  name: scheduledRunName('nightly', at),
  scheduledTime: at,
  ...fields,
});
const succeeded = (at: Date) => run(at, { phase: 'Succeeded', completionTime: new Date(at.getTime() + 3_600_000) });
const nightly = (day: number) => new Date(Date.UTC(2026, 11, day, 3));
const deleted = (decision: ScheduleDecision) => decision.deleteRuns.map((entry) => `${entry.because} ${entry.name}`);

describe('a run planted for a time still to come', () => {
  const planted = [0, 1, 2].map((minute) => succeeded(new Date(Date.UTC(9999, 0, 1, 0, minute))));

  it('is no history: the runs the schedule made are kept to the limit, the planted ones stay', () => {
    const real = [1, 2, 3, 4, 5, 6].map((day) => succeeded(nightly(day)));
    const decision = decide({ runs: [...real, ...planted] });
    // successfulRunsHistoryLimit 3: the three oldest real runs go, the three newest stay.
    expect(deleted(decision)).toEqual([3, 2, 1].map((day) => `History ${scheduledRunName('nightly', nightly(day))}`));
  });

  it('does not make a run the schedule made past the history limits as soon as it ends', () => {
    const decision = decide({ runs: [succeeded(nightly(7)), ...planted] });
    expect(decision.deleteRuns).toEqual([]);
  });

  it('is no success of the schedule, and is not listed or counted as active', () => {
    const running = run(new Date(Date.UTC(9999, 0, 2)), { phase: 'Running' });
    const decision = decide({ runs: [succeeded(nightly(6)), ...planted, running] });
    expect(decision.status.lastSuccessfulTime).toBe('2026-12-06T04:00:00Z');
    expect(decision.status.active).toEqual([]);
    expect(decision.status.activeCount).toBe(0);
  });

  it('holds no Forbid and is not deleted by Replace', () => {
    const running = run(new Date(Date.UTC(9999, 0, 2)), { phase: 'Running' });
    const phaseless = run(new Date(Date.UTC(9999, 0, 3)));
    const now = new Date('2026-12-08T03:00:05Z');
    const forbid = decide({ spec: { concurrencyPolicy: 'Forbid' }, runs: [running], foreign: [phaseless], now });
    expect(forbid.create?.toISOString()).toBe('2026-12-08T03:00:00.000Z');
    const replace = decide({ spec: { concurrencyPolicy: 'Replace' }, runs: [running], foreign: [phaseless], now });
    expect(replace.create?.toISOString()).toBe('2026-12-08T03:00:00.000Z');
    expect(replace.deleteRuns).toEqual([]);
  });

  it('takes its own time once that time comes, as a run planted under the name does', () => {
    const early = run(nightly(8), { phase: 'Running' });
    // Before its time: the 12-07 run's status holds, and nothing of the planted run shows.
    expect(decide({ runs: [early] }).status.active).toEqual([]);
    const decision = decide({ runs: [early], now: new Date('2026-12-08T03:00:05Z') });
    expect(decision.create).toBeUndefined();
    expect(decision.status.lastScheduleTime).toBe('2026-12-08T03:00:00Z');
    expect(decision.status.active?.map((active) => active.name)).toEqual([early.name]);
  });

  it('is the schedule’s within the clock-skew allowance: another replica’s clock may run ahead', () => {
    const aheadOfThisClock = run(new Date(NOW.getTime() + SCHEDULED_TIME_CLOCK_SKEW_MS), { phase: 'Running' });
    const pastIt = run(new Date(NOW.getTime() + SCHEDULED_TIME_CLOCK_SKEW_MS + 60_000), { phase: 'Running' });
    const decision = decide({ runs: [aheadOfThisClock, pastIt] });
    expect(decision.status.active?.map((active) => active.name)).toEqual([aheadOfThisClock.name]);
  });
});

describe('a run planted for a past minute that is none of the cron’s times', () => {
  // The schedule makes runs only at its cron's times; a run under the name of any other whole
  // minute was planted. Three ended ones for 03:01–03:03 were the newest history, and the
  // schedule's own 03:00 run was deleted as history as soon as it ended.
  const at = (iso: string) => new Date(iso);
  const planted = ['2026-12-07T03:01:00Z', '2026-12-07T03:02:00Z', '2026-12-07T03:03:00Z'].map((iso) => succeeded(at(iso)));

  it('never pushes a run for a cron time past the history limits: it is deleted first', () => {
    const real = [5, 6, 7].map((day) => succeeded(nightly(day)));
    const decision = decide({ runs: [...real, ...planted], now: at('2026-12-07T05:00:00Z') });
    expect(deleted(decision).sort()).toEqual(planted.map((each) => `History ${each.name}`).sort());
  });

  it('is kept within the limits while the cron’s own runs leave room (a run of the cron before an edit)', () => {
    const decision = decide({ runs: [succeeded(nightly(7)), planted[0]!], now: at('2026-12-07T05:00:00Z') });
    expect(decision.deleteRuns).toEqual([]);
  });

  it('is no success of the schedule', () => {
    const decision = decide({ runs: [succeeded(nightly(7)), ...planted], now: at('2026-12-07T05:00:00Z') });
    expect(decision.status.lastSuccessfulTime).toBe('2026-12-07T04:00:00Z');
  });

  it('after an edit of the cron, the runs of the old one go before any of the new one’s', () => {
    // Was `0 3 * * *`, now `0 4 * * *`: the 03:00 runs are the schedule's own, of its old cron.
    const old = [5, 6].map((day) => succeeded(nightly(day)));
    const fresh = [7, 8, 9].map((day) => succeeded(new Date(Date.UTC(2026, 11, day, 4))));
    const decision = decide({
      spec: { schedule: '0 4 * * *' },
      lastScheduleTime: '2026-12-09T04:00:00Z',
      runs: [...old, ...fresh],
      now: at('2026-12-09T06:00:00Z'),
    });
    expect(deleted(decision).sort()).toEqual(old.map((each) => `History ${each.name}`).sort());
  });
});

describe('a run that never gets a phase', () => {
  // The operator gives a run a phase within seconds, and a run's age cannot be told safely: its
  // creation time is the API server's clock, and the schedule's clock may be an hour on (an
  // operator outage). So an unfinished run holds the schedule however long it has had no phase.
  const now = new Date('2026-12-08T03:00:05Z');
  /** Listed as the API server lists it: made a second after its time, no status written since. */
  const listed = (at: Date, name = scheduledRunName('nightly', at)) =>
    toScheduledRun({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: {
        name,
        namespace: 'team',
        uid: `u-${name}`,
        creationTimestamp: new Date(at.getTime() + 1000).toISOString(),
        labels: { 'chamvi.dev/schedule': 'nightly', 'chamvi.dev/scheduled-time': scheduledTimeLabelValue(at) },
      },
      spec: RUN,
    } as unknown as CodingRun);

  it('planted and padded past any status write, holds a Forbid schedule until it is deleted (a known limit)', () => {
    // As a run planted for each time due would: docs/schedules.md, `kubectl delete crun NAME`.
    const own = decide({ spec: { concurrencyPolicy: 'Forbid' }, runs: listed(nightly(1)), now });
    expect(own.create).toBeUndefined();
    expect(own.status.activeCount).toBe(1);
    const foreign = decide({ spec: { concurrencyPolicy: 'Forbid' }, foreign: listed(nightly(1), 'nightly-x7k2p'), now });
    expect(foreign.create).toBeUndefined();
  });

  it('made just before an operator outage and found still phaseless, holds Forbid and is no history', () => {
    // failedRunsHistoryLimit 0 deleted the legitimate run as failed history, and Forbid started
    // the next time due beside it.
    const decision = decide({ spec: { concurrencyPolicy: 'Forbid', failedRunsHistoryLimit: 0 }, runs: listed(nightly(7)), now });
    expect(decision.create).toBeUndefined();
    expect(decision.deleteRuns).toEqual([]);
    expect(decision.status.active?.map((active) => active.name)).toEqual([scheduledRunName('nightly', nightly(7))]);
  });

  it('is deleted by Replace as the active run it is', () => {
    const [stale] = listed(nightly(1));
    const decision = decide({ spec: { concurrencyPolicy: 'Replace' }, runs: [stale!], now });
    expect(decision.create?.toISOString()).toBe('2026-12-08T03:00:00.000Z');
    expect(deleted(decision)).toEqual([`Replace ${stale!.name}`]);
    expect(decision.events.map((event) => event.message)).toEqual([`Deleted active run ${stale!.name}: concurrencyPolicy is Replace`]);
  });
});
