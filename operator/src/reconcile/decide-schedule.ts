// What a CodingSchedule should do now: plain data in (the schedule, its runs as the API
// server lists them, whether its run spec resolves, the clock), a decision out. CronJob's
// rules, kept so a user's CronJob intuition holds:
//
// - The due time is the latest scheduled time after the last one handled (lastScheduleTime,
//   lastMissedTime, or the schedule's creation) and at or before now. Earlier missed times
//   are dropped: an operator down for a day starts one run, not one per missed time.
// - Past startingDeadlineSeconds the due time is skipped and reported (MissedSchedule).
// - Forbid leaves the due time unhandled while a run is active, so it starts when that run
//   ends if still within the deadline; Replace deletes the unfinished runs; Allow just creates.
//   Active means any unfinished run the schedule controls, its foreign ones included
//   (runs-of-schedule.ts), however long it has had no phase (holdsSchedule).
// - Suspend creates nothing; on resume the latest missed time runs if within the deadline.
//
// Runs planted ahead (docs/schedules.md): whoever may create CodingRuns can write a run under the
// name, labels and controller reference the schedule gives a time. One labelled for a time still
// to come is not the schedule's until that time (SCHEDULED_TIME_CLOCK_SKEW_MS); and one for a
// minute that is none of the cron's times never pushes a run for a cron time past the history
// limits and is no success (pastHistoryLimits). One that never gets a phase holds the schedule
// until it is deleted (holdsSchedule), a known limit.
//
// Idempotence (an operator killed between creating a run and writing the status): the runs
// carry their scheduled time in a label, so when a run for the due time already exists the
// decision records it instead of creating another. The controller lists runs from the API
// server, never from a cache, so a run it has just created is always seen; and each time has
// one run name (names.ts scheduledRunName), so a create sent twice makes one run.
import { isTerminal, type Condition, type Phase } from '../api/index.ts';
import {
  SCHEDULE_ACTIVE_LISTED,
  SCHEDULE_CONDITION_READY,
  type CodingScheduleSpec,
  type CodingScheduleStatus,
} from '../api/coding-schedule.ts';
import { oneLineText } from '../text/one-line-text.ts';
import type { RunEvent } from './decision.ts';
import type { CronSchedule } from './cron-schedule.ts';

/** A run this schedule owns, as listed from the API server. */
export interface ScheduledRun {
  name: string;
  scheduledTime: Date;
  phase?: Phase;
  completionTime?: Date;
  /** Being deleted (deletionTimestamp): neither active nor history. */
  deleting?: boolean;
}

/** Why no run can be created from this schedule, when so (the Ready condition's reason and message). */
export interface ScheduleProblem {
  /** RunRefused: the API server refused the run due (an admission policy, a quota, an invalid template). */
  reason: 'InvalidSchedule' | 'TemplateNotFound' | 'InvalidRunSpec' | 'RunRefused';
  message: string;
}

export interface ScheduleInput {
  spec: CodingScheduleSpec;
  status: CodingScheduleStatus | undefined;
  generation: number;
  createdAt: Date;
  /** The parsed cron expression; undefined with `problem` InvalidSchedule. */
  cron: CronSchedule | undefined;
  /** Set when the schedule or its run spec is invalid: nothing is created. */
  problem?: ScheduleProblem;
  /**
   * How many decisions in a row before this one found this same problem, for the same spec and
   * template (the reconciler counts; absent: none). A template problem is looked at again less
   * often the longer it stays (templateRecheckMs).
   */
  problemRepeats?: number;
  runs: ScheduledRun[];
  /**
   * Runs for a scheduled time that are not the schedule's own: those naming it as their
   * controller under a name an earlier operator generated, not made as it makes them now
   * (runs-of-schedule.ts), and the run found holding the name of the time due when its create
   * was refused AlreadyExists. One for the time due takes that time: nothing is created for it
   * (it may be the schedule's own run, made before an edit, whose status write was lost), and a
   * Warning Event says so. Active, a listed one holds Forbid and Replace deletes it, as a run of
   * the schedule's: it may be one. Never listed in status, never history, never the last success.
   */
  foreign?: ScheduledRun[];
  now: Date;
}

export interface ScheduleDecision {
  /** Create a run for this scheduled time. */
  create?: Date;
  /** Runs to delete: Replace's unfinished runs, then history past the limits. */
  deleteRuns: Array<{ name: string; because: 'Replace' | 'History' }>;
  /** The whole status (without a run created by `create`: the controller adds it once the API server has taken it). */
  status: CodingScheduleStatus;
  events: RunEvent[];
  /** Decide again after this long even if nothing changes (the next scheduled time). */
  requeueAfterMs?: number;
}

/**
 * Problems a schedule is looked at again for, ever less often (templateRecheckMs): a template
 * created or fixed later ends them, and nothing watches templates. Any other problem waits for
 * an edit of the schedule, which wakes it.
 */
export const isRecheckedProblem = (reason: ScheduleProblem['reason']): boolean =>
  reason === 'TemplateNotFound' || reason === 'InvalidRunSpec';

/**
 * A schedule whose template is missing or makes an invalid run looks again after this, the
 * first time: the controller does not watch CodingRunTemplates, and the time due stays due, so
 * a template applied just after its schedule (`kubectl apply -f dir/`) starts the run within it.
 */
export const TEMPLATE_RECHECK_MS = 30_000;
/**
 * The longest wait between two looks at the same problem. Each look is a read of the schedule,
 * of its template and a list of its runs: 10 000 schedules naming a template that never comes,
 * looked at every 30 s, kept the shared reconcile loop busy for all the others.
 */
export const TEMPLATE_RECHECK_MAX_MS = 10 * 60_000;

/**
 * The wait before looking again at a schedule that found the same problem `repeats` times in a
 * row before this one: 30 s, then doubling to 10 minutes. An edit of the schedule is a new
 * problem (the reconciler counts), and wakes the schedule at once anyway.
 */
export function templateRecheckMs(repeats: number): number {
  return Math.min(TEMPLATE_RECHECK_MS * 2 ** Math.min(Math.max(repeats, 0), 16), TEMPLATE_RECHECK_MAX_MS);
}

/** A run kept past the history limits until the status records its time goes this soon after. */
export const HELD_HISTORY_RECHECK_MS = 1000;

/**
 * The CRD's maxLength of a condition's message: a longer one makes the API server refuse the
 * whole status write (422), and the schedule would say nothing of its problem. Each problem's
 * message is kept short where it is made (spec-issues.ts); this is the bound that holds whatever
 * a message holds.
 */
export const CONDITION_MESSAGE_MAX = 32_768;

/**
 * The message on one line, hidden characters spelled out (text/one-line-text.ts): a problem may
 * quote the API server's or an admission webhook's words (RunRefused), and kubectl describe,
 * Argo CD and Flux print a condition's message as it is. Within CONDITION_MESSAGE_MAX counted in
 * UTF-8 bytes once spelled, so within it however the API server counts (its 422 says bytes),
 * and cut between characters and spellings: half a surrogate pair would be stored as another
 * text, and the next compare would differ and warn again. Spelling an escaped message again
 * changes nothing, so what status holds compares equal to what is decided from the same problem.
 */
function conditionMessage(message: string): string {
  const shown = oneLineText(message, CONDITION_MESSAGE_MAX);
  if (shown.length * 3 <= CONDITION_MESSAGE_MAX) return shown;
  // The characters of the spelled text that fit in the bytes: spelled again to that many, the
  // message ends at a whole spelling at or before them.
  const { read } = new TextEncoder().encodeInto(shown, new Uint8Array(CONDITION_MESSAGE_MAX));
  return oneLineText(message, read);
}

/**
 * How far after now a run's labelled time may be and the run still be the schedule's. The
 * schedule makes a run only for a time at or before its clock, so a run for a later time was made
 * ahead by someone else (the name and the controller reference can be worked out). Three finished
 * runs planted for 9999 stayed the newest history for ever, and every run the schedule made was
 * deleted as history as soon as it ended. The allowance is for another replica's clock running
 * ahead of this one's (a run made by the leader before a handover): minutes, as NTP keeps nodes
 * well within, and a planted run it lets in takes only its own time, minutes away anyway.
 */
export const SCHEDULED_TIME_CLOCK_SKEW_MS = 5 * 60_000;

/**
 * Holds the schedule (Forbid, status.active) and Replace deletes it: not finished and not being
 * deleted, with a phase or without. A run's age without a phase is no sign it was planted: its
 * creation time is the API server's clock, and this decision's `now` may be an hour on (an
 * operator outage), so a legitimate run judged by it held nothing and Forbid started a second
 * beside it. A run planted under the schedule's name and padded past any status write never gets
 * a phase and holds a Forbid schedule until it is deleted, as a run planted for each time due
 * would (docs/schedules.md).
 */
export const holdsSchedule = (run: ScheduledRun): boolean => !run.deleting && !isTerminal(run.phase);
/** The run's time has come (SCHEDULED_TIME_CLOCK_SKEW_MS): before it, the run is not the schedule's. */
export const isTimeCome = (run: ScheduledRun, now: Date): boolean =>
  run.scheduledTime.getTime() <= now.getTime() + SCHEDULED_TIME_CLOCK_SKEW_MS;
const later = (a: Date | undefined, b: Date | undefined) => (a && b ? (a > b ? a : b) : (a ?? b));
const date = (value: string | undefined) => (value ? new Date(value) : undefined);
/** RFC 3339 to the second, as Kubernetes writes its own timestamps (scheduled times are whole minutes). */
const iso = (value: Date | undefined) => value?.toISOString().replace(/\.\d{3}Z$/, 'Z');

export function decideSchedule(input: ScheduleInput): ScheduleDecision {
  const { spec, status = {}, now, cron } = input;
  const events: RunEvent[] = [];
  const deleteRuns: ScheduleDecision['deleteRuns'] = [];
  let lastScheduleTime = date(status.lastScheduleTime);
  let lastMissedTime = date(status.lastMissedTime);
  // Runs for a time still to come are left out of everything: neither active, history, the run
  // for the time due, nor a success. No Event is said of them: they do nothing to the schedule
  // until their time, whoever planted them could make the schedule warn at every reconcile, and
  // when the time comes the run takes it as any run planted under the name does.
  const runs = input.runs.filter((run) => isTimeCome(run, now));
  const foreign = (input.foreign ?? []).filter((run) => isTimeCome(run, now));
  let active = runs.filter(holdsSchedule);
  // Not listed or counted in status, but under the concurrency policy: one may be the schedule's
  // own run, made before an earlier operator's lost status write and an edit.
  const foreignActive = foreign.filter(holdsSchedule);
  let create: Date | undefined;
  // The run found already made for the time due: until a status write records that time, the
  // run is the only sign it was handled.
  let recorded: ScheduledRun | undefined;

  const due = cron && !input.problem ? dueTime(input, cron) : undefined;
  if (due && !spec.suspend) {
    const existing = runs.find((run) => run.scheduledTime.getTime() === due.getTime());
    const claiming = foreign.filter((run) => run.scheduledTime.getTime() === due.getTime());
    const deadline = spec.startingDeadlineSeconds;
    if (existing) {
      // Created by an earlier attempt whose status write was lost: record it, create nothing.
      lastScheduleTime = due;
      recorded = existing;
    } else if (claiming.length > 0) {
      // The time is taken, though the run is not counted: a second run for it would run beside the first.
      lastScheduleTime = due;
      events.push(foreignRunEvent(claiming, due));
    } else if (deadline !== undefined && now.getTime() - due.getTime() > deadline * 1000) {
      lastMissedTime = due;
      events.push({
        type: 'Warning',
        reason: 'MissedSchedule',
        message: `Skipped the run due at ${due.toISOString()}: it could not start within startingDeadlineSeconds (${deadline}s)`,
      });
    } else if (spec.concurrencyPolicy === 'Forbid' && active.length + foreignActive.length > 0) {
      // Left unhandled: the run starts when the active one ends, if still within the deadline.
    } else {
      if (spec.concurrencyPolicy === 'Replace') {
        for (const run of [...active, ...foreignActive]) {
          deleteRuns.push({ name: run.name, because: 'Replace' });
          events.push({ type: 'Normal', reason: 'RunReplaced', message: `Deleted active run ${run.name}: concurrencyPolicy is Replace` });
        }
        active = [];
      }
      create = due;
      lastScheduleTime = due;
    }
  }

  // Not the run just recorded, though past the limits (finished, a limit of 0): were this
  // status write to fail too (a 409, a 422), the next decision would find the time due and no
  // run for it, and make the run again. It goes at the next decision, once its time is recorded.
  const pastLimits = pastHistoryLimits(runs, spec, cron);
  const heldBack = recorded !== undefined && pastLimits.includes(recorded.name);
  for (const name of pastLimits) if (name !== recorded?.name) deleteRuns.push({ name, because: 'History' });

  // Only a run for one of the cron's times: one planted for another minute could end later. The
  // latest ending first, so that the cron is asked of no more runs than end after the one taken.
  const recordedSuccess = date(status.lastSuccessfulTime);
  const lastSuccess = runs
    .filter((run) => run.phase === 'Succeeded' && run.completionTime && !(recordedSuccess && run.completionTime <= recordedSuccess))
    .sort((a, b) => b.completionTime!.getTime() - a.completionTime!.getTime())
    .find((run) => isCronTime(cron, run));
  const lastSuccessfulTime = later(recordedSuccess, lastSuccess?.completionTime);
  const next = cron && !spec.suspend && !input.problem ? cron.nextAfter(now) : undefined;
  const ready = input.problem
    ? { status: 'False' as const, reason: input.problem.reason, message: conditionMessage(input.problem.message) }
    : spec.suspend
      ? { status: 'True' as const, reason: 'Suspended', message: 'The schedule is valid and suspended: no runs are created.' }
      : { status: 'True' as const, reason: 'Scheduled', message: `The next run is due at ${next?.toISOString() ?? 'no time'}.` };
  const previousReady = status.conditions?.find((condition) => condition.type === SCHEDULE_CONDITION_READY);
  // Escaped to escaped: a message an older operator stored raw warns no second time for the same problem.
  if (input.problem && (previousReady?.reason !== ready.reason || conditionMessage(previousReady.message) !== ready.message)) {
    events.push({ type: 'Warning', reason: input.problem.reason, message: input.problem.message });
  }
  const readyCondition: Condition = {
    type: SCHEDULE_CONDITION_READY,
    ...ready,
    observedGeneration: input.generation,
    lastTransitionTime:
      previousReady && previousReady.status === ready.status && previousReady.reason === ready.reason
        ? previousReady.lastTransitionTime
        : iso(now)!,
  };
  // A changed message alone (the next due time) must not make a new transition time, but it
  // does make a status write per scheduled time, which is what `kubectl get` wants to show.

  const keptActive = active.filter((run) => !deleteRuns.some((deleted) => deleted.name === run.name));
  const newStatus: CodingScheduleStatus = {
    observedGeneration: input.generation,
    // The newest, when more are active than status may list (the API server refuses the write).
    active: keptActive
      .sort((a, b) => a.scheduledTime.getTime() - b.scheduledTime.getTime())
      .slice(-SCHEDULE_ACTIVE_LISTED)
      .map((run) => ({ name: run.name, scheduledTime: iso(run.scheduledTime)! })),
    activeCount: keptActive.length,
    ...optional('lastScheduleTime', iso(lastScheduleTime)),
    ...optional('lastSuccessfulTime', iso(lastSuccessfulTime)),
    ...optional('lastMissedTime', iso(lastMissedTime)),
    ...optional('nextScheduleTime', iso(next)),
    conditions: [readyCondition, ...(status.conditions ?? []).filter((condition) => condition.type !== SCHEDULE_CONDITION_READY)],
  };
  return {
    ...(create ? { create } : {}),
    deleteRuns,
    status: newStatus,
    events,
    ...(heldBack
      ? { requeueAfterMs: HELD_HISTORY_RECHECK_MS }
      : next
        ? { requeueAfterMs: Math.max(1000, next.getTime() - now.getTime()) }
        : input.problem && isRecheckedProblem(input.problem.reason)
          ? { requeueAfterMs: templateRecheckMs(input.problemRepeats ?? 0) }
          : {}),
  };
}

/** Said once, when the schedule makes no run for its due time because a foreign run takes it. */
function foreignRunEvent(claiming: readonly ScheduledRun[], due: Date): RunEvent {
  const more = claiming.length > 1 ? ` (and ${claiming.length - 1} more)` : '';
  return {
    type: 'Warning',
    reason: 'ForeignRun',
    message:
      `Run ${claiming[0]!.name}${more} takes the run due at ${due.toISOString()}: it holds the name or the labels of this ` +
      "schedule's run for that time, but is not one the schedule made (made by another author, or by an earlier operator " +
      "from an earlier spec); not creating another. It is not counted as the schedule's run",
  };
}

/** The latest scheduled time after the last one handled and at or before now, if any. */
function dueTime(input: ScheduleInput, cron: CronSchedule): Date | undefined {
  const handled = later(later(date(input.status?.lastScheduleTime), date(input.status?.lastMissedTime)), input.createdAt)!;
  const latest = cron.latestAtOrBefore(input.now);
  return latest && latest > handled ? latest : undefined;
}

/**
 * Whether the run's time is one of the cron's: the schedule makes runs only at those. Its name
 * can be planted for any whole minute (runs-of-schedule.ts takes a run under the name of any
 * minute as the schedule's). Without a cron (an invalid schedule) none can be told apart: all count.
 */
function isCronTime(cron: CronSchedule | undefined, run: ScheduledRun): boolean {
  return cron === undefined || cron.latestAtOrBefore(run.scheduledTime)?.getTime() === run.scheduledTime.getTime();
}

/**
 * Finished runs past successfulRunsHistoryLimit / failedRunsHistoryLimit: runs for one of the
 * cron's times are kept first, newest first; a run for any other minute only in the room they
 * leave. Three ended runs planted for 03:01-03:03 were the newest history of a `0 3 * * *`
 * schedule, and its own 03:00 run was deleted as it ended.
 *
 * Only the current cron's times are told: after an edit of spec.schedule the runs of the old
 * cron are the schedule's own, but are ranked as a planted run is. They stay while the new
 * cron's runs leave room and go first as those come, which is what a user who edited the cron
 * expects of the history anyway; and a run carries no mark of the spec it was made from that
 * its creator could not write too, so nothing better tells them apart.
 */
function pastHistoryLimits(runs: readonly ScheduledRun[], spec: CodingScheduleSpec, cron: CronSchedule | undefined): string[] {
  // Told only where a limit is passed: each is a cron look-up, and thousands may be planted.
  const past = (group: ScheduledRun[], limit: number) => {
    if (group.length <= limit) return [];
    const onCron = new Map(group.map((run) => [run, isCronTime(cron, run)]));
    const keptFirst = (a: ScheduledRun, b: ScheduledRun) =>
      Number(onCron.get(b)) - Number(onCron.get(a)) || b.scheduledTime.getTime() - a.scheduledTime.getTime();
    return group.sort(keptFirst).slice(limit);
  };
  const finished = runs.filter((run) => !run.deleting && isTerminal(run.phase));
  const succeeded = finished.filter((run) => run.phase === 'Succeeded');
  const failed = finished.filter((run) => run.phase !== 'Succeeded');
  return [...past(succeeded, spec.successfulRunsHistoryLimit), ...past(failed, spec.failedRunsHistoryLimit)].map((run) => run.name);
}

function optional<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}
