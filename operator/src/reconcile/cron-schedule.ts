// A CodingSchedule's cron expression read in its time zone: the scheduled times around a
// moment. Built on croner (no dependencies, IANA zones through Intl, daylight-saving gaps and
// repeats handled as cron does: a skipped time runs at the first minute after the gap, a
// repeated one runs once). Pure: the clock is always an argument.
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
  return {
    ok: true,
    schedule: {
      // croner's previousRuns is second-grained and excludes its reference: ask from the next
      // whole second, so a time exactly at `now` counts.
      latestAtOrBefore: (now) => cron.previousRuns(1, new Date(Math.floor(now.getTime() / 1000) * 1000 + 1000))[0],
      nextAfter: (after) => cron.nextRun(after) ?? undefined,
    },
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
