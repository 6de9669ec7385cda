// status.timings as pure data: entries from start and end, merged in run order with the first
// measurement kept, and the controller's three sandbox phases held inside creation → Ready.
import { describe, expect, it } from 'vitest';
import type { RunTiming } from '../../operator/src/api/index.ts';
import { addedTimings, hasNewTimings, mergeTimings, sandboxTimings, timing } from '../../operator/src/reconcile/run-timings.ts';

const at = (seconds: number) => new Date(Date.UTC(2026, 10, 30, 12, 0, 0) + seconds * 1000);
const iso = (seconds: number) => at(seconds).toISOString();

describe('timing', () => {
  it('keeps the start to the millisecond and the duration in whole milliseconds', () => {
    expect(timing('Clone', at(1.2345), at(1.5))).toEqual({ phase: 'Clone', start: '2026-11-30T12:00:01.234Z', durationMs: 266 });
  });
  it('counts a clock that went backwards as 0 ms, never negative', () => {
    expect(timing('Import', at(5), at(4)).durationMs).toBe(0);
  });
});

describe('mergeTimings', () => {
  const clone = timing('Clone', at(10), at(11));
  const queued = timing('Queued', at(0), at(1));
  const redoneClone = timing('Clone', at(20), at(25));
  const cases: Array<{ name: string; existing?: RunTiming[]; added?: RunTiming[]; expected: RunTiming[] }> = [
    { name: 'nothing', expected: [] },
    { name: 'only added', added: [clone], expected: [clone] },
    { name: 'sorted in run order, not arrival order', existing: [clone], added: [queued], expected: [queued, clone] },
    { name: 'the first measurement of a phase stands (a redone job)', existing: [clone], added: [redoneClone], expected: [clone] },
    {
      name: 'a repeat inside added keeps its first',
      added: [redoneClone, clone, queued],
      expected: [queued, redoneClone],
    },
  ];
  for (const row of cases) {
    it(row.name, () => expect(mergeTimings(row.existing, row.added)).toEqual(row.expected));
  }

  it('says what a write added, and whether there is anything to add', () => {
    expect(addedTimings([queued], [queued, clone])).toEqual([clone]);
    expect(hasNewTimings([queued, clone], [clone])).toBe(false);
    expect(hasNewTimings([queued], [clone])).toBe(true);
    expect(hasNewTimings(undefined, undefined)).toBe(false);
  });
});

describe('sandboxTimings', () => {
  const cases: Array<{
    name: string;
    times: { createdAt?: string; admittedAt?: string; scheduledAt?: string; ready: number };
    expected: Array<[string, string, number]>;
  }> = [
    {
      name: 'created, admitted, bound, ready: three phases that meet end to start',
      times: { createdAt: iso(0), admittedAt: iso(2), scheduledAt: iso(2.05), ready: 3 },
      expected: [
        ['Queued', iso(0), 2000],
        ['PodScheduled', iso(2), 50],
        ['PodReady', iso(2.05), 950],
      ],
    },
    {
      name: 'a bind time from whole seconds before admission is held at admission',
      times: { createdAt: iso(0), admittedAt: iso(1.5), scheduledAt: iso(1), ready: 2 },
      expected: [
        ['Queued', iso(0), 1500],
        ['PodScheduled', iso(1.5), 0],
        ['PodReady', iso(1.5), 500],
      ],
    },
    {
      name: 'a bind time after Ready is held at Ready',
      times: { createdAt: iso(0), admittedAt: iso(0), scheduledAt: iso(9), ready: 4 },
      expected: [
        ['Queued', iso(0), 0],
        ['PodScheduled', iso(0), 4000],
        ['PodReady', iso(4), 0],
      ],
    },
    {
      name: 'no bind time known: PodReady counts from admission',
      times: { createdAt: iso(0), admittedAt: iso(1), ready: 3 },
      expected: [
        ['Queued', iso(0), 1000],
        ['PodReady', iso(1), 2000],
      ],
    },
    { name: 'nothing known but Ready: nothing to say', times: { ready: 3 }, expected: [] },
  ];
  for (const row of cases) {
    it(row.name, () => {
      const { ready, ...rest } = row.times;
      const entries = sandboxTimings({ ...rest, readyAt: at(ready) });
      expect(entries.map((entry) => [entry.phase, entry.start, entry.durationMs])).toEqual(row.expected);
    });
  }
});
