// Runs planted under a CodingSchedule's name by someone who may create CodingRuns in its
// namespace: the name, the labels and the controller reference to the schedule's uid can all be
// worked out ahead (docs/schedules.md). Such a run takes its own time, and may be deleted by
// Replace and the history limits; it must do nothing more. Here: a run labelled for a time still
// to come (it stayed the newest history for ever, and every run the schedule made was deleted as
// history as it ended), and a run that never gets a phase (too large for any status write: it
// held a Forbid schedule for good). Pure: the real cron parser, an explicit clock.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { codingScheduleSpec, type CodingScheduleSpecInput } from '../../operator/src/api/coding-schedule.ts';
import { parseCronSchedule } from '../../operator/src/reconcile/cron-schedule.ts';
import {
  decideSchedule,
  PHASELESS_RUN_HOLDS_MS,
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

describe('a run that never gets a phase', () => {
  const now = new Date('2026-12-08T03:00:05Z');
  const madeAgo = (ms: number) => new Date(now.getTime() - ms);
  // Planted for the 12-01 time, padded so that no status write of it is stored.
  const stale = run(nightly(1), { createdAt: madeAgo(PHASELESS_RUN_HOLDS_MS + 1000) });

  it('holds a Forbid schedule only while it may still be waiting for its first status', () => {
    const fresh = run(nightly(7), { createdAt: madeAgo(PHASELESS_RUN_HOLDS_MS - 1000) });
    const held = decide({ spec: { concurrencyPolicy: 'Forbid' }, runs: [fresh], now });
    expect(held.create).toBeUndefined();
    expect(held.status.activeCount).toBe(1);

    const decision = decide({ spec: { concurrencyPolicy: 'Forbid' }, runs: [stale], now });
    expect(decision.create?.toISOString()).toBe('2026-12-08T03:00:00.000Z');
    expect(decision.status.active).toEqual([]);
    expect(decision.status.activeCount).toBe(0);
  });

  it('holds Forbid no longer when it is a foreign run either', () => {
    const decision = decide({ spec: { concurrencyPolicy: 'Forbid' }, foreign: [{ ...stale, name: 'nightly-x7k2p' }], now });
    expect(decision.create?.toISOString()).toBe('2026-12-08T03:00:00.000Z');
  });

  it('is deleted by Replace, as an active run is: given a phase late, it would run beside the new one', () => {
    const decision = decide({ spec: { concurrencyPolicy: 'Replace' }, runs: [stale], now });
    expect(decision.create?.toISOString()).toBe('2026-12-08T03:00:00.000Z');
    expect(deleted(decision)).toEqual([`Replace ${stale.name}`]);
    expect(decision.events.map((event) => event.message)).toEqual([
      `Deleted run ${stale.name}, which never got a phase: concurrencyPolicy is Replace`,
    ]);
  });

  it('is no history: it never ends, so the history limits never delete it', () => {
    const decision = decide({ spec: { successfulRunsHistoryLimit: 0, failedRunsHistoryLimit: 0 }, runs: [stale], now });
    expect(decision.deleteRuns).toEqual([]);
  });

  it('is listed with its creation time, which the decision measures its wait by', () => {
    const listed = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: {
        name: stale.name,
        namespace: 'team',
        uid: 'planted',
        creationTimestamp: '2026-12-01T02:00:00Z',
        labels: { 'chamvi.dev/schedule': 'nightly', 'chamvi.dev/scheduled-time': scheduledTimeLabelValue(nightly(1)) },
      },
      spec: RUN,
    } as unknown as CodingRun;
    expect(toScheduledRun(listed)).toEqual([{ name: stale.name, scheduledTime: nightly(1), createdAt: new Date('2026-12-01T02:00:00Z') }]);
  });
});
