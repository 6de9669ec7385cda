// Lists a schedule's runs from the API server a page at a time and keeps of each only what the
// decision reads: its name, uid, scheduled time, phase, completion time and whether it is being
// deleted. Anyone who may create CodingRuns can label runs of ~1.5 MiB each with the schedule's
// name, and each phase change of one wakes the schedule: a list answered whole held every one of
// them, and its parsed copy, against the operator's heap at every reconcile. Each page is told
// apart (runs-of-schedule.ts: which need a run's spec only for a name an earlier operator
// generated) and dropped before the next is asked for. A run labelled for a time still to come is
// not kept at all: decideSchedule leaves it out until then (isTimeCome), and planted ones, newer
// than any, filled what was kept.
import type { CodingSchedule } from '../api/coding-schedule.ts';
import { holdsSchedule, isTimeCome, type ScheduledRun } from '../reconcile/decide-schedule.ts';
import { runsOfSchedule, type ScheduleMaking } from '../reconcile/runs-of-schedule.ts';
import { toScheduledRun } from '../reconcile/scheduled-run.ts';
import type { ScheduleGateway, ScheduleRunPage } from '../kube/schedule-gateway.ts';

/**
 * The most runs of one schedule a reconcile keeps, its own and foreign ones together, of those
 * whose time has come: active ones first, then the newest by scheduled time. Above what a schedule
 * of its own makes: the status lists the newest SCHEDULE_ACTIVE_LISTED (1 000) active runs and
 * history keeps at most 100 succeeded and 100 failed; Forbid and Replace keep one active. More is a
 * runaway Allow or runs planted under the schedule's name, bounded otherwise only by the
 * namespace's quota. Kept slim (~670 bytes each with a name of 253 characters, a uid and two dates,
 * measured on Node 20), and held up to twice over while the list goes on (cut once a sort is worth
 * it), 5 000 bound a reconcile to under 10 MiB on top of the one page in transit. Active runs are
 * kept before any other (keptFirst), so what is left out holds nothing and is older than everything
 * else kept that holds nothing: the time due is the newest, and history past the limits is deleted
 * from the kept, so the next reconciles reach the older ones. Only past 5 000 active runs is one
 * left uncounted.
 */
export const SCHEDULE_RUNS_KEPT = 5_000;

/** What a reconcile knows of the schedule's runs. */
export interface ListedScheduleRuns {
  /** Its own runs (runs-of-schedule.ts). */
  runs: ScheduledRun[];
  /** Runs under an earlier operator's generated name it did not make as it makes them now. */
  foreign: ScheduledRun[];
  /** The uid each kept run was listed with, by name: a run is deleted only under that uid. */
  uids: Map<string, string>;
  /** How many of the schedule's runs were past SCHEDULE_RUNS_KEPT and left out (the oldest). */
  leftOut: number;
}

export interface ScheduleRunsListing {
  kube: Pick<ScheduleGateway, 'listScheduleRuns'>;
  schedule: CodingSchedule;
  making: ScheduleMaking;
  /** The decision's clock: which runs' time has come (isTimeCome). */
  now: Date;
  /** Runs asked for per page (SCHEDULE_RUN_PAGE_LIMIT); tests make it small. */
  pageLimit: number;
  /** SCHEDULE_RUNS_KEPT; tests make it small. */
  keep?: number;
}

interface Kept {
  run: ScheduledRun;
  uid: string;
  foreign: boolean;
}

/**
 * What the cut keeps first: runs holding the schedule as decideSchedule counts them (Forbid waits
 * for them, Replace deletes them, and runs planted under the schedule's name, finished and newer,
 * must not push the one still running out of sight: Forbid then started a second run beside it),
 * then the newest.
 */
const keptFirst = (a: Kept, b: Kept) =>
  Number(holdsSchedule(b.run)) - Number(holdsSchedule(a.run)) || b.run.scheduledTime.getTime() - a.run.scheduledTime.getTime();

export async function listRunsOfSchedule(listing: ScheduleRunsListing): Promise<ListedScheduleRuns> {
  const { kube, schedule, making, now, pageLimit, keep = SCHEDULE_RUNS_KEPT } = listing;
  const { namespace, name } = schedule.metadata;
  let kept: Kept[] = [];
  let leftOut = 0;
  // Cut to `keep` only once twice as many are held: a sort per page would cost more than it saves.
  const cut = () => {
    if (kept.length <= keep) return;
    leftOut += kept.length - keep;
    kept = kept.sort(keptFirst).slice(0, keep);
  };
  // Takes what it keeps of a page and answers the next page's token. A function of its own: a
  // page held in a variable of the loop stayed alive through the next page's await.
  const take = (page: ScheduleRunPage): string | undefined => {
    const { own, foreign } = runsOfSchedule(page, schedule, making);
    // Each is one ScheduledRun: runsOfSchedule keeps only runs labelled with a valid time. Made
    // of fresh values, never the listed object, so no part of the page outlives it.
    const keepEach = (runs: typeof own, isForeign: boolean) => {
      for (const run of runs)
        for (const scheduled of toScheduledRun(run))
          if (isTimeCome(scheduled, now)) kept.push({ run: scheduled, uid: run.metadata.uid, foreign: isForeign });
    };
    keepEach(own, false);
    keepEach(foreign, true);
    if (kept.length >= 2 * keep) cut();
    return page.continue || undefined;
  };
  let token: string | undefined;
  do token = take(await kube.listScheduleRuns(namespace, name, { limit: pageLimit, ...(token ? { continue: token } : {}) }));
  while (token);
  cut();
  return {
    runs: kept.filter((entry) => !entry.foreign).map((entry) => entry.run),
    foreign: kept.filter((entry) => entry.foreign).map((entry) => entry.run),
    uids: new Map(kept.map((entry) => [entry.run.name, entry.uid])),
    leftOut,
  };
}
