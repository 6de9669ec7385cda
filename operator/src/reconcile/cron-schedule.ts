// A CodingSchedule's cron expression read in its time zone: the scheduled times around a
// moment. The expression is matched against the zone's wall clock (croner, no dependencies,
// asked in UTC, which has no daylight-saving changes), and each wall-clock time it matches
// becomes the instants it names there (zone-wall-clock.ts), by the rules docs/schedules.md
// states, as cron keeps them:
//
// - A schedule at chosen hours (the hour field is not `*` or `*/n`: `30 2 * * *`,
//   `0,30 2 * * *`, `0 2,14 * * *`) runs a time the clocks skip at the first minute after the
//   gap (02:30 in Berlin on the last Sunday of March runs at 03:00 CEST; several skipped times
//   make that one run), and a time they repeat once, at its first occurrence.
// - A schedule over every hour (`*/30 * * * *`, `0 * * * *`, `@hourly`, `0 */2 * * *`) runs by
//   the clock as it goes: a skipped time is not made up (its next time comes anyway), and a
//   repeated time runs at both occurrences, so `0 * * * *` still runs once an hour of real time.
//
// croner's own zone handling moved a skipped time past the gap only when the minute and the hour
// were single values (`0,30 2 * * *` made nothing that day), and gave both occurrences of a
// repeated time; both are decided here instead. Pure: the clock is always an argument.
import { Cron } from 'croner';
import { zoneWallClock, type ZoneWallClock } from './zone-wall-clock.ts';

export interface CronSchedule {
  /** The latest scheduled time at or before `now`, or undefined when there is none. */
  latestAtOrBefore(now: Date): Date | undefined;
  /** The first scheduled time strictly after `after`. */
  nextAfter(after: Date): Date | undefined;
}

export type ParsedCronSchedule = { ok: true; schedule: CronSchedule } | { ok: false; message: string };

const MINUTE = 60_000;
/** Beyond the largest change of a zone's clocks (two hours, Troll), and within the weeks between two changes. */
const CHANGE_MS = 3 * 60 * MINUTE;
/**
 * Wall-clock times looked at for one answer, at most. A few usually; about 120 for `* * * * *`
 * asked within a repeated hour (each minute of it names two instants), 60 for `* 2 * * *` on the
 * day its hour is skipped. A bound so that no expression can make a reconcile spin.
 */
const MAX_WALL_CLOCK_TIMES = 1_000;

export function parseCronSchedule(expression: string, timeZone = 'UTC'): ParsedCronSchedule {
  if (!isTimeZone(timeZone)) return { ok: false, message: `timeZone ${timeZone} is not an IANA time zone name (such as Europe/Berlin)` };
  let wallClock: Cron;
  try {
    // 5-part: minutes, as CronJob (no seconds, no years). domAndDow false: a day matches when
    // its day-of-month or its day-of-week does, as in cron and CronJob.
    wallClock = new Cron(expression, { mode: '5-part', timezone: 'UTC', domAndDow: false });
    if (!wallClock.nextRun(new Date(0))) return { ok: false, message: `schedule "${expression}" never matches a date` };
  } catch (error) {
    return { ok: false, message: `schedule "${expression}" is not a cron expression: ${(error as Error).message}` };
  }
  const zone = zoneWallClock(timeZone);
  const instantsOf = scheduledInstants(zone, overEveryHour(expression));
  return {
    ok: true,
    schedule: {
      latestAtOrBefore: (now) => {
        const limit = now.getTime();
        // No wall-clock time past this names an instant at or before `now`.
        let wall = limit + Math.max(zone.offsetAt(now), zone.offsetAt(new Date(limit - CHANGE_MS))) + MINUTE;
        let latest: number | undefined;
        for (let looked = 0; looked < MAX_WALL_CLOCK_TIMES; looked++) {
          // croner's previousRuns excludes its reference: times at `wall` itself were looked at already.
          const previous = wallClock.previousRuns(1, new Date(wall))[0];
          if (!previous) break;
          wall = previous.getTime();
          const instants = instantsOf(new Date(wall));
          const last = instants.findLast((instant) => instant <= limit);
          if (last === undefined) continue;
          if (latest === undefined || last > latest) latest = last;
          // Earlier wall-clock times name earlier instants, but for a repeated time's second
          // occurrence: one left out for being after `now` may be later than an earlier time's.
          if (last === instants.at(-1)) break;
        }
        return latest === undefined ? undefined : new Date(latest);
      },
      nextAfter: (after) => {
        const limit = after.getTime();
        // No wall-clock time before this names an instant after `after` (the repeated hour of a
        // change just ahead included: its second occurrences show earlier times).
        let wall = limit + Math.min(zone.offsetAt(after), zone.offsetAt(new Date(limit + CHANGE_MS))) - MINUTE;
        let next: number | undefined;
        for (let looked = 0; looked < MAX_WALL_CLOCK_TIMES; looked++) {
          const following = wallClock.nextRun(new Date(wall));
          if (!following) break;
          wall = following.getTime();
          const instants = instantsOf(new Date(wall));
          const first = instants.find((instant) => instant > limit);
          if (first === undefined) continue;
          if (next === undefined || first < next) next = first;
          // Later wall-clock times name later instants, but for a repeated time's second
          // occurrence: a later time's first occurrence may come before it.
          if (first === instants[0]) break;
        }
        return next === undefined ? undefined : new Date(next);
      },
    },
  };
}

/** The instants a matched wall-clock time runs at, earliest first: none, one, or (over every hour, repeated) two. */
function scheduledInstants(zone: ZoneWallClock, everyHour: boolean): (wallClock: Date) => number[] {
  return (wallClock) => {
    const named = zone.instantsOf(wallClock);
    switch (named.kind) {
      case 'once':
        return [named.at.getTime()];
      case 'twice':
        return everyHour ? [named.first.getTime(), named.second.getTime()] : [named.first.getTime()];
      case 'skipped':
        // The first whole minute after the gap: scheduled times are whole minutes (a run's name holds its minute).
        return everyHour ? [] : [Math.ceil(named.gapEnd.getTime() / MINUTE) * MINUTE];
    }
  };
}

// Whether the schedule runs over every hour rather than at chosen ones: its hour field is `*`
// (or `?`, croner's `*`) or a step of it (`*/2`), as cron tells its "wildcard" jobs, which a
// daylight-saving change does not move.
function overEveryHour(expression: string): boolean {
  const fields = expression.trim().toLowerCase().split(/\s+/);
  if (fields[0]?.startsWith('@')) return fields[0] === '@hourly';
  return /^[*?]/.test(fields[1] ?? '');
}

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
