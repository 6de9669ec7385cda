// Which runs are a CodingSchedule's own: those it made, as it makes them. Its labels and a
// controller ownerReference to its uid are no proof: whoever may create CodingRuns in the
// namespace can write both (the uid is readable), and a run so planted for the next due time
// made the schedule skip its own ("already made"), report the planted run's times as its own,
// and, active under concurrencyPolicy Forbid, hold every later run. As an eval judges its
// attempts (controller/eval-reconciler.ts isAttemptRun), a run counts when it is what
// scheduledRunObject makes for its scheduled time: labels, scheduled-at annotation, creator,
// spec, never changed since (generation 1). Pure.
//
// A schedule's run spec can change (its template or spec.runTemplate edited) while runs it made
// before still run or are kept as history; those no longer match what it makes now. The
// schedule's status.active, which only the operator writes, names the runs it made that were
// active at its last write: such a run stays the schedule's until it finishes, so Forbid and
// Replace still see it. A finished run made from an earlier spec is left to its TTL or to a
// person (docs/schedules.md).
//
// That write can be lost (a 409 because spec.runTemplate was edited meanwhile, a restart after
// the create) while the spec changes: the schedule's own run for a time is then foreign, not
// listed active. So a foreign run labelled and annotated for a time takes that time: the
// schedule creates no second run for it (two under Forbid), and counts neither. It takes no
// other time: a planted one then costs the schedule one time, never holds it.
import { isDeepStrictEqual } from 'node:util';
import { GROUP, codingRunSpec, type CodingRun, type CodingRunSpecInput } from '../api/index.ts';
import type { CodingRunTemplate } from '../api/coding-run-template.ts';
import {
  SCHEDULE_KIND,
  SCHEDULE_LABEL,
  SCHEDULED_AT_ANNOTATION,
  type CodingSchedule,
  type CodingScheduleSpec,
} from '../api/coding-schedule.ts';
import { CREATOR_ANNOTATION, TEMPLATE_WRITER_ANNOTATION } from './approval-answer.ts';
import { scheduledRunObject, toScheduledRun } from './scheduled-run.ts';

/** How the schedule makes a run now: its parsed spec, and the run spec and template it resolved to (none: it cannot make one now). */
export interface ScheduleMaking {
  spec: CodingScheduleSpec;
  runSpec?: CodingRunSpecInput;
  template?: CodingRunTemplate;
}

export interface RunsOfSchedule {
  /** The schedule's own runs. */
  own: CodingRun[];
  /**
   * Runs naming the schedule as their controller, with its label and the scheduled-at annotation
   * of the time they are labelled with, that it did not make as it makes them: never counted,
   * deleted or replaced, but the schedule makes no other run for their time.
   */
  foreign: CodingRun[];
}

type OwnerReference = { apiVersion?: string; kind?: string; uid?: string; controller?: boolean };
const controllerOf = (run: CodingRun) =>
  (run.metadata as { ownerReferences?: OwnerReference[] }).ownerReferences?.find((owner) => owner.controller === true);

/** The run names this schedule (this uid, not an earlier one of its name) as its controller. */
function controlledBy(run: CodingRun, schedule: CodingSchedule): boolean {
  const controller = controllerOf(run);
  return (
    controller !== undefined &&
    controller.apiVersion?.split('/')[0] === GROUP &&
    controller.kind === SCHEDULE_KIND &&
    controller.uid === schedule.metadata.uid
  );
}

/**
 * Of the runs carrying the schedule's label, those it controls, told apart: its own, and the
 * foreign ones. A run with the label and no controller reference to it is neither (a run
 * labelled by hand), nor is one whose scheduled-at annotation does not name its labelled time.
 */
export function runsOfSchedule(runs: readonly CodingRun[], schedule: CodingSchedule, making: ScheduleMaking): RunsOfSchedule {
  const own: CodingRun[] = [];
  const foreign: CodingRun[] = [];
  for (const run of runs) {
    if (!controlledBy(run, schedule)) continue;
    if (isScheduleRun(run, schedule, making)) own.push(run);
    else if (labelledForItsTime(run, schedule)) foreign.push(run);
  }
  return { own, foreign };
}

/**
 * Whether the run is one the schedule made for the time its label names. Without a run spec
 * (the schedule or its template is invalid, or missing) only what does not depend on it is
 * compared: the schedule creates nothing then, and its runs are still listed and kept to the
 * history limits.
 */
export function isScheduleRun(run: CodingRun, schedule: CodingSchedule, making: ScheduleMaking): boolean {
  const [scheduled] = toScheduledRun(run);
  if (!scheduled) return false;
  const time = scheduled.scheduledTime;
  // Without a run spec, none is compared below: only the name, labels and annotation the schedule gives every run.
  const expected = scheduledRunObject(schedule, making.spec, making.runSpec ?? ({} as CodingRunSpecInput), time, making.template);
  const { labels = {}, annotations = {} } = run.metadata;
  const madeForThatTime =
    run.metadata.namespace === schedule.metadata.namespace &&
    run.metadata.name.startsWith(expected.metadata.generateName) &&
    labels[SCHEDULE_LABEL] === schedule.metadata.name &&
    annotations[SCHEDULED_AT_ANNOTATION] === time.toISOString();
  if (!madeForThatTime) return false;
  if (making.runSpec === undefined || listedActive(run, schedule, time)) return true;
  const expectedAnnotations: Record<string, string> = expected.metadata.annotations;
  return (
    // The API server raises the generation of a run with finalizers it marks for deletion.
    (run.metadata.deletionTimestamp !== undefined || (run.metadata.generation ?? 1) === 1) &&
    Object.entries(expected.metadata.labels).every(([key, value]) => labels[key] === value) &&
    Object.entries(expectedAnnotations).every(([key, value]) => annotations[key] === value) &&
    [CREATOR_ANNOTATION, TEMPLATE_WRITER_ANNOTATION].every((key) => annotations[key] === expectedAnnotations[key]) &&
    sameRunSpec(run.spec, expected.spec)
  );
}

/** The run carries the schedule's label and the scheduled-at annotation of the time its scheduled-time label names. */
function labelledForItsTime(run: CodingRun, schedule: CodingSchedule): boolean {
  const [scheduled] = toScheduledRun(run);
  return (
    scheduled !== undefined &&
    run.metadata.labels?.[SCHEDULE_LABEL] === schedule.metadata.name &&
    run.metadata.annotations?.[SCHEDULED_AT_ANNOTATION] === scheduled.scheduledTime.toISOString()
  );
}

/**
 * Both specs as the operator reads a run's: the API server fills in a default or two the
 * schedule's merged spec may leave out (a sandbox env var's value), which the parse fills in alike.
 */
function sameRunSpec(stored: unknown, made: CodingRunSpecInput): boolean {
  const parsedStored = codingRunSpec.safeParse(stored);
  const parsedMade = codingRunSpec.safeParse(made);
  return parsedStored.success && parsedMade.success && isDeepStrictEqual(parsedStored.data, parsedMade.data);
}

/** The schedule's last status lists the run as active, for that time: only the operator writes it, after making the run. */
function listedActive(run: CodingRun, schedule: CodingSchedule, time: Date): boolean {
  const at = time.toISOString().replace(/\.\d{3}Z$/, 'Z');
  return (schedule.status?.active ?? []).some((listed) => listed.name === run.metadata.name && listed.scheduledTime === at);
}
