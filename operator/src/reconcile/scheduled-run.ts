// The CodingRun a schedule creates for one scheduled time: its spec (the template with the
// schedule's runTemplate.spec laid over it, parsed exactly as a plain run's spec), and the
// object itself, named for the schedule and the time (names.ts scheduledRunName), controlled
// by the schedule and labelled with it and the scheduled time (how a restarted operator finds
// a run it already made).
import { API_VERSION, codingRunSpec, KIND, type CodingRun, type CodingRunSpecInput } from '../api/index.ts';
import type { CodingRunTemplate } from '../api/coding-run-template.ts';
import {
  SCHEDULE_KIND,
  SCHEDULE_LABEL,
  SCHEDULED_AT_ANNOTATION,
  SCHEDULED_TIME_LABEL,
  type CodingSchedule,
  type CodingScheduleSpec,
} from '../api/coding-schedule.ts';
import {
  APPROVAL_ANNOTATION,
  APPROVER_ANNOTATION,
  CREATOR_ANNOTATION,
  TEMPLATE_WRITER_ANNOTATION,
  creatorOf,
  templateWriterOf,
} from './approval-answer.ts';
import { CANCEL_ANNOTATION } from './cancel-request.ts';
import { MAX_RUN_BYTES } from './decide.ts';
import { runBytes } from './run-bytes.ts';
import { mergeRunSpec } from './merge-run-spec.ts';
import { scheduledRunName } from './names.ts';
import { specFieldPath, specIssuesMessage } from './spec-issues.ts';
import type { ScheduledRun, ScheduleProblem } from './decide-schedule.ts';
import { storedJsonBytes } from '../text/stored-json-bytes.ts';

export type ResolvedRunSpec = { ok: true; spec: CodingRunSpecInput } | { ok: false; problem: ScheduleProblem };

/**
 * `template` is what the API server returned for spec.templateRef (undefined: not found);
 * ignored without a templateRef.
 */
export function resolveScheduledRunSpec(spec: CodingScheduleSpec, template: CodingRunTemplate | undefined): ResolvedRunSpec {
  const override = (spec.runTemplate?.spec ?? {}) as Record<string, unknown>;
  let base: Record<string, unknown> = {};
  if (spec.templateRef) {
    if (!template) {
      return {
        ok: false,
        problem: {
          reason: 'TemplateNotFound',
          message: `CodingRunTemplate ${spec.templateRef.name} does not exist in this namespace: create it or change spec.templateRef`,
        },
      };
    }
    base = template.spec as Record<string, unknown>;
  }
  const merged = mergeRunSpec(base, override);
  const source = spec.templateRef ? `CodingRunTemplate ${spec.templateRef.name} with spec.runTemplate.spec` : 'spec.runTemplate.spec';
  const tooLarge = tooLargeProblem(spec, merged, source);
  if (tooLarge) return { ok: false, problem: tooLarge };
  const parsed = codingRunSpec.safeParse(merged);
  if (!parsed.success) {
    return {
      ok: false,
      problem: { reason: 'InvalidRunSpec', message: specIssuesMessage(`${source} is not a valid CodingRun spec: `, parsed.error.issues) },
    };
  }
  // The merged input, not the parsed output: the operator's parse applies the defaults when it
  // reads the run, so the run reads exactly like one written by hand.
  return { ok: true, spec: merged as CodingRunSpecInput };
}

/**
 * The run would be over MAX_RUN_BYTES: the run reconciler refuses such a run (Failed,
 * InvalidSpec), and past etcd's 1.5 MiB the API server refuses to store it at all. Merged,
 * a run can be larger than its template and its schedule each are (objects merge, and each
 * may be just under the limit), so neither was refused when it was written. Measured as the
 * run carries them (the merged spec and the labels and annotations of spec.runTemplate), and as
 * decide.ts measures a run: runBytes.
 */
function tooLargeProblem(spec: CodingScheduleSpec, merged: Record<string, unknown>, source: string): ScheduleProblem | undefined {
  const metadata = spec.runTemplate?.metadata ?? {};
  const bytes = runBytes({ metadata, spec: merged });
  if (bytes <= MAX_RUN_BYTES) return undefined;
  // Each field's share of the run as the API server stores it, as its size is judged (run-bytes.ts).
  const parts = [
    ...Object.entries(merged).map(([field, value]) => ({ field: specFieldPath([field]), bytes: storedJsonBytes(value) })),
    ...Object.entries(metadata).map(([field, value]) => ({ field: `spec.runTemplate.metadata.${field}`, bytes: storedJsonBytes(value) })),
  ];
  const largest = parts
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, 3)
    .map((part) => `${part.field} (${Math.ceil(part.bytes / 1024)} KiB)`)
    .join(', ');
  return {
    reason: 'InvalidRunSpec',
    message:
      `${source} makes a run of ${Math.ceil(bytes / 1024)} KiB as the API server stores it, over the ${MAX_RUN_BYTES / 1024} KiB a run may be ` +
      `(the API server keeps objects under 1.5 MiB, and the run has its status to hold); the largest fields: ${largest}. ` +
      'Shorten them (spec.sandbox.env, spec.task and spec.instructions are the usual ones), in the template or in spec.runTemplate',
  };
}

/** Unix seconds: a label value (no colons), and exactly one per scheduled minute. */
export const scheduledTimeLabelValue = (time: Date) => String(Math.floor(time.getTime() / 1000));

/**
 * What the schedule's author may not write on a run through spec.runTemplate.metadata: who
 * wrote the task (only the operator writes those), and the answers a person gives a run once it
 * waits (an approval with its approver, a cancel). Copied, an approval written once in the
 * schedule answered the first call of every run it made, in the approver's name the author
 * chose, before anyone was asked; a cancel ended each run as it began.
 */
const NOT_FROM_RUN_TEMPLATE: ReadonlySet<string> = new Set([
  CREATOR_ANNOTATION,
  TEMPLATE_WRITER_ANNOTATION,
  APPROVAL_ANNOTATION,
  APPROVER_ANNOTATION,
  CANCEL_ANNOTATION,
]);

/** The schedule author's own annotations, without those NOT_FROM_RUN_TEMPLATE. */
const withoutWriters = (annotations: Record<string, string> | undefined) =>
  Object.fromEntries(Object.entries(annotations ?? {}).filter(([key]) => !NOT_FROM_RUN_TEMPLATE.has(key)));

/**
 * The run to create, under the one name it has for its time. `template` is the
 * spec.templateRef the run spec was resolved from: its writer is named on the run.
 */
export function scheduledRunObject(
  schedule: CodingSchedule,
  spec: CodingScheduleSpec,
  runSpec: CodingRunSpecInput,
  time: Date,
  template?: CodingRunTemplate,
) {
  const { name, namespace, uid } = schedule.metadata;
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: {
      name: scheduledRunName(name, time),
      namespace,
      labels: {
        ...(spec.runTemplate?.metadata?.labels ?? {}),
        [SCHEDULE_LABEL]: name,
        [SCHEDULED_TIME_LABEL]: scheduledTimeLabelValue(time),
      },
      annotations: {
        ...withoutWriters(spec.runTemplate?.metadata?.annotations),
        ...creatorOf(schedule),
        ...(spec.templateRef ? templateWriterOf(template) : {}),
        [SCHEDULED_AT_ANNOTATION]: time.toISOString(),
      },
      ownerReferences: [{ apiVersion: API_VERSION, kind: SCHEDULE_KIND, name, uid, controller: true }],
    },
    spec: runSpec,
  };
}

/**
 * The last second RFC 3339 can write: its years have four digits. The API server's date-time
 * format refuses a later time (`+010000-01-01T00:00:00Z`, what toISOString makes of one), so a
 * status listing such a time is refused whole (422).
 */
export const LAST_RFC3339_TIME = new Date('9999-12-31T23:59:59Z');

/**
 * A run of the schedule as decideSchedule counts it, from its scheduled-time label; none when
 * the label is not a time the status can hold (anyone who may create or edit runs can write
 * it: a 13-digit value made a date past the year 275760, a 12-digit one past 9999, and each
 * made the status write fail at every reconcile). The bound is the format's, not a guess at
 * how far ahead a schedule plans: decideSchedule leaves out a run labelled for a time still to
 * come (SCHEDULED_TIME_CLOCK_SKEW_MS) until that time.
 */
export function toScheduledRun(run: CodingRun): ScheduledRun[] {
  const label = run.metadata.labels?.[SCHEDULED_TIME_LABEL] ?? '';
  const scheduledTime = new Date(Number(label) * 1000);
  // Written so that an invalid date (NaN, past the year 275760) fails the test too.
  if (!/^\d+$/.test(label) || !(scheduledTime.getTime() <= LAST_RFC3339_TIME.getTime())) return [];
  return [scheduledRunAt(run, scheduledTime)];
}

/** The run as decideSchedule counts it, for a time known otherwise than from its label (the time whose name it holds). */
export function scheduledRunAt(run: CodingRun, scheduledTime: Date): ScheduledRun {
  return {
    name: run.metadata.name,
    scheduledTime,
    ...(run.status?.phase ? { phase: run.status.phase } : {}),
    ...(run.status?.completionTime ? { completionTime: new Date(run.status.completionTime) } : {}),
    ...(run.metadata.deletionTimestamp ? { deleting: true } : {}),
  };
}
