// A CodingSchedule's cron expression read in its time zone: the scheduled times around a
// moment. Built on croner (no dependencies, IANA zones through Intl, daylight-saving gaps
// handled as cron does: a skipped time runs at the first minute after the gap). A time that
// happens twice (the hour repeated when the clocks go back) runs once: croner gives both
// occurrences of a schedule with more than one time in that hour (`0,30 1 * * *` ran four
// times), so the second occurrence of a wall-clock time is left out here. Pure: the clock is
// always an argument.
import { Cron } from 'croner';

export interface CronSchedule {
  /** The latest scheduled time at or before `now`, or undefined when there is none. */
  latestAtOrBefore(now: Date): Date | undefined;
  /** The first scheduled time strictly after `after`. */
  nextAfter(after: Date): Date | undefined;
}

export type ParsedCronSchedule = { ok: true; schedule: CronSchedule } | { ok: false; message: string };

export function parseCronSchedule(expression: string, timeZone = 'UTC'): ParsedCronSchedule {
  if (!isTimeZone(timeZone)) return { ok: false, message: `timeZone ${timeZone} is not an IANA time zone name (such as Europe/Berlin)` };
  let cron: Cron;
  try {
    // 5-part: minutes, as CronJob (no seconds, no years). domAndDow false: a day matches when
    // its day-of-month or its day-of-week does, as in cron and CronJob.
    cron = new Cron(expression, { mode: '5-part', timezone: timeZone, domAndDow: false });
    if (!cron.nextRun(new Date(0))) return { ok: false, message: `schedule "${expression}" never matches a date` };
  } catch (error) {
    return { ok: false, message: `schedule "${expression}" is not a cron expression: ${(error as Error).message}` };
  }
  const repeated = repeatedWallClock(timeZone);
  return {
    ok: true,
    schedule: {
      // croner's previousRuns is second-grained and excludes its reference: ask from the next
      // whole second, so a time exactly at `now` counts.
      latestAtOrBefore: (now) => {
        let time: Date | undefined = cron.previousRuns(1, new Date(Math.floor(now.getTime() / 1000) * 1000 + 1000))[0];
        while (time && repeated(time)) time = cron.previousRuns(1, time)[0];
        return time;
      },
      nextAfter: (after) => {
        let time = cron.nextRun(after) ?? undefined;
        while (time && repeated(time)) time = cron.nextRun(time) ?? undefined;
        return time;
      },
    },
  };
}

/** How far clocks go back somewhere: 30 minutes (Lord Howe Island), an hour, two hours (Troll). */
const SETBACKS_MS = [30, 60, 120].map((minutes) => minutes * 60_000);

/** Whether a time is the second occurrence of its wall-clock time in the zone (the clocks went back over it). */
function repeatedWallClock(timeZone: string): (time: Date) => boolean {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  return (time) => {
    const wallClock = format.format(time);
    return SETBACKS_MS.some((setback) => format.format(new Date(time.getTime() - setback)) === wallClock);
  };
}

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
