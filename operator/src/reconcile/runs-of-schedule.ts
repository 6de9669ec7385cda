// Which runs are a CodingSchedule's own. The schedule gives its run for each scheduled time one
// name (names.ts scheduledRunName) and a controller reference to its uid: a run under that name
// that names this schedule as its controller is its run for that time, whatever its spec. The
// spec is no test of ownership: the template or spec.runTemplate may be edited while a run made
// before still runs or is kept as history, and the status write that listed the run can be lost
// meanwhile (a 409 when spec.runTemplate is edited while the create is in flight, a restart).
// A run so identified, counted as foreign for its spec, let Forbid start a second run beside it
// and Replace leave it running. Pure.
//
// The name and the reference are no proof against whoever may create CodingRuns in the
// namespace: both can be written ahead of the time (the uid is readable). Such a run is counted
// as the schedule's for its time, which it took anyway by holding the name; whoever may create
// runs can hold the namespace's quota or maxActiveRuns as well (docs/schedules.md). A run under
// the name that does NOT name this schedule as its controller is never the schedule's: its
// create for that time is refused AlreadyExists, and the reconciler reports it ForeignRun.
//
// Runs made by an operator before names were given (metadata.generateName, `<schedule>-x7k2p`)
// are judged as they were then (isLegacyScheduleRun): made as the schedule makes them now
// (labels, scheduled-at annotation, creator, spec, generation 1), or listed in status.active.
// One that names the schedule as its controller and is labelled and annotated for a time but
// does not match is foreign: it takes that time (it may be the schedule's own, made before an
// edit whose status write was lost), holds Forbid while active and is deleted by Replace, and is
// never history or a success of the schedule's.
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
import { scheduledRunName } from './names.ts';
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
   * Runs under a name an earlier operator generated (`<schedule>-x7k2p`) naming the schedule as
   * their controller, with its label and the scheduled-at annotation of the time they are
   * labelled with, that it did not make as it makes them: under its concurrencyPolicy while
   * active, never history; the schedule makes no other run for their time.
   */
  foreign: CodingRun[];
}

type OwnerReference = { apiVersion?: string; kind?: string; uid?: string; controller?: boolean };
const controllerOf = (run: CodingRun) =>
  (run.metadata as { ownerReferences?: OwnerReference[] }).ownerReferences?.find((owner) => owner.controller === true);

/** The run names this schedule (this uid, not an earlier one of its name) as its controller. */
export function controlledBy(run: CodingRun, schedule: CodingSchedule): boolean {
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
 * labelled by hand), nor is one under a name the schedule never gives, nor one whose
 * scheduled-at annotation does not name its labelled time.
 */
export function runsOfSchedule(runs: readonly CodingRun[], schedule: CodingSchedule, making: ScheduleMaking): RunsOfSchedule {
  const own: CodingRun[] = [];
  const foreign: CodingRun[] = [];
  for (const run of runs) {
    if (!controlledBy(run, schedule)) continue;
    if (isScheduleRun(run, schedule, making)) own.push(run);
    else if (hasLegacyName(run, schedule) && labelledForItsTime(run, schedule)) foreign.push(run);
  }
  return { own, foreign };
}

/**
 * Whether the run is the schedule's for the time its label names: controlled by it, in its
 * namespace, labelled with it, and under the name the schedule gives that time (any spec), or,
 * made by an earlier operator, under a generated name and made as the schedule makes it
 * (isLegacyScheduleRun).
 */
export function isScheduleRun(run: CodingRun, schedule: CodingSchedule, making: ScheduleMaking): boolean {
  const [scheduled] = toScheduledRun(run);
  if (
    !scheduled ||
    !controlledBy(run, schedule) ||
    run.metadata.namespace !== schedule.metadata.namespace ||
    run.metadata.labels?.[SCHEDULE_LABEL] !== schedule.metadata.name
  ) {
    return false;
  }
  const time = scheduled.scheduledTime;
  // Scheduled times are whole minutes, and the name keeps only the minute: a label 30 s off
  // would name the same run for another time.
  if (time.getTime() % 60_000 === 0 && run.metadata.name === scheduledRunName(schedule.metadata.name, time)) return true;
  return hasLegacyName(run, schedule) && isLegacyScheduleRun(run, schedule, making, time);
}

/**
 * The generateName an operator before scheduledRunName gave the schedule's runs: the name cut to
 * 52 characters, a trailing '.' or '-' trimmed. The API server added 5 characters.
 */
function legacyGenerateName(scheduleName: string): string {
  return `${scheduleName.slice(0, 52).replace(/[-.]+$/, '')}-`;
}

/** The run's name is one the API server generated for the schedule (never one scheduledRunName gives: its suffix has 5 characters, not a minute count). */
function hasLegacyName(run: CodingRun, schedule: CodingSchedule): boolean {
  const prefix = legacyGenerateName(schedule.metadata.name);
  const { name } = run.metadata;
  return name.length === prefix.length + 5 && name.startsWith(prefix) && /^[a-z0-9]{5}$/.test(name.slice(prefix.length));
}

/**
 * A run an earlier operator made under a generated name is the schedule's when it is what the
 * schedule makes for its time now, or listed in status.active for that time (only the operator
 * writes the status, after making the run). Without a run spec (the schedule or its template is
 * invalid, or missing) only what does not depend on it is compared: the schedule creates nothing
 * then, and its runs are still listed and kept to the history limits.
 */
function isLegacyScheduleRun(run: CodingRun, schedule: CodingSchedule, making: ScheduleMaking, time: Date): boolean {
  // Without a run spec, none is compared below: only the labels and annotation the schedule gives every run.
  const expected = scheduledRunObject(schedule, making.spec, making.runSpec ?? ({} as CodingRunSpecInput), time, making.template);
  const { labels = {}, annotations = {} } = run.metadata;
  if (annotations[SCHEDULED_AT_ANNOTATION] !== time.toISOString()) return false;
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
