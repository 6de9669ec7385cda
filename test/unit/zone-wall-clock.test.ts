// Which instants a wall-clock time names in a zone: one, none in the gap when the clocks go
// forward (with the instant the gap ends), two in the hour they go back. The zone data is
// Node's (Intl); the dates are 2026's changes.
import { describe, expect, it } from 'vitest';
import { zoneWallClock } from '../../operator/src/reconcile/zone-wall-clock.ts';

/** A wall-clock time, written as the instant that shows it in UTC. */
const wall = (text: string) => new Date(`${text}Z`);
const iso = (date: Date) => date.toISOString();

describe('zoneWallClock', () => {
  it.each([
    ['UTC', '2026-06-01T03:00:00', '2026-06-01T03:00:00.000Z'],
    ['Europe/Berlin', '2026-01-15T09:00:00', '2026-01-15T08:00:00.000Z'],
    ['Europe/Berlin', '2026-07-15T09:00:00', '2026-07-15T07:00:00.000Z'],
    ['Asia/Kolkata', '2026-06-01T09:00:00', '2026-06-01T03:30:00.000Z'],
    // Just before and just after Berlin's gap.
    ['Europe/Berlin', '2026-03-29T01:59:00', '2026-03-29T00:59:00.000Z'],
    ['Europe/Berlin', '2026-03-29T03:00:00', '2026-03-29T01:00:00.000Z'],
  ])('in %s, %s names one instant, %s', (zone, time, instant) => {
    const named = zoneWallClock(zone).instantsOf(wall(time));
    expect(named.kind === 'once' && iso(named.at)).toBe(instant);
  });

  it.each([
    // 02:00 CET becomes 03:00 CEST.
    ['Europe/Berlin', '2026-03-29T02:30:00', '2026-03-29T01:00:00.000Z'],
    ['Europe/Berlin', '2026-03-29T02:00:00', '2026-03-29T01:00:00.000Z'],
    ['America/New_York', '2026-03-08T02:15:00', '2026-03-08T07:00:00.000Z'],
    // A half-hour change: 02:00 becomes 02:30.
    ['Australia/Lord_Howe', '2026-10-04T02:15:00', '2026-10-03T15:30:00.000Z'],
    // A two-hour change: 01:00 UTC becomes 03:00 CEST.
    ['Antarctica/Troll', '2026-03-29T02:30:00', '2026-03-29T01:00:00.000Z'],
  ])('in %s, %s is skipped, and the gap ends at %s', (zone, time, gapEnd) => {
    const named = zoneWallClock(zone).instantsOf(wall(time));
    expect(named.kind === 'skipped' && iso(named.gapEnd)).toBe(gapEnd);
  });

  it.each([
    ['America/New_York', '2026-11-01T01:30:00', '2026-11-01T05:30:00.000Z', '2026-11-01T06:30:00.000Z'],
    ['Europe/Berlin', '2026-10-25T02:00:00', '2026-10-25T00:00:00.000Z', '2026-10-25T01:00:00.000Z'],
    ['Australia/Lord_Howe', '2026-04-05T01:45:00', '2026-04-04T14:45:00.000Z', '2026-04-04T15:15:00.000Z'],
  ])('in %s, %s happens twice: %s, then %s', (zone, time, first, second) => {
    const named = zoneWallClock(zone).instantsOf(wall(time));
    expect(named.kind === 'twice' && [iso(named.first), iso(named.second)]).toEqual([first, second]);
  });

  it('gives the offset at an instant, before and after a change', () => {
    const berlin = zoneWallClock('Europe/Berlin');
    expect(berlin.offsetAt(new Date('2026-03-29T00:59:59Z'))).toBe(3_600_000);
    expect(berlin.offsetAt(new Date('2026-03-29T01:00:00Z'))).toBe(7_200_000);
  });
});
