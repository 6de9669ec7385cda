// CodingSchedule: creates CodingRuns on a cron schedule, with the CronJob semantics users
// know (timeZone, concurrencyPolicy, suspend, startingDeadlineSeconds, history limits). The
// run each time is an optional CodingRunTemplate with spec.runTemplate laid over it.
import { z } from 'zod';
import type { ObjectMeta } from './object-meta.ts';
import { celValidations, type CrossFieldRule } from './cross-field-rules.ts';
import { GROUP } from './group.ts';
import { condition, objectName } from './kubernetes-names.ts';
import { NOT_WHITESPACE } from './portable-pattern.ts';

export const SCHEDULE_KIND = 'CodingSchedule';
export const SCHEDULE_PLURAL = 'codingschedules';
export const SCHEDULE_SINGULAR = 'codingschedule';
export const SCHEDULE_SHORT_NAMES = ['csched'] as const;
export const SCHEDULE_CRD_NAME = `${SCHEDULE_PLURAL}.${GROUP}`;

/** Label on every run a schedule created: the schedule's name. */
export const SCHEDULE_LABEL = `${GROUP}/schedule`;
/** Label on every run a schedule created: the scheduled time it was created for, in Unix seconds. */
export const SCHEDULED_TIME_LABEL = `${GROUP}/scheduled-time`;
/** Annotation with the same time as RFC 3339, for people. */
export const SCHEDULED_AT_ANNOTATION = `${GROUP}/scheduled-at`;

export const CONCURRENCY_POLICIES = ['Allow', 'Forbid', 'Replace'] as const;
export type ConcurrencyPolicy = (typeof CONCURRENCY_POLICIES)[number];

// Five fields or a nickname; the operator parses it fully (cron-schedule.ts) and says what is
// wrong in the status. CronJob refuses TZ= in the schedule for the same reason: spec.timeZone.
// NOT_WHITESPACE, not \S: the API server's RE2 and JavaScript read \S differently (portable-pattern.ts).
const SCHEDULE_PATTERN = `^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|${NOT_WHITESPACE}+( ${NOT_WHITESPACE}+){4})$`;
const TIME_ZONE_PATTERN = '^[A-Za-z][A-Za-z0-9_+\\-]*(/[A-Za-z0-9_+\\-]+)*$';

type ScheduleSpecInput = { templateRef?: unknown; runTemplate?: { spec?: Record<string, unknown> } };

export const scheduleRules: readonly CrossFieldRule<ScheduleSpecInput>[] = [
  {
    rule:
      'has(self.templateRef) || (has(self.runTemplate) && has(self.runTemplate.spec) && has(self.runTemplate.spec.task) && ' +
      'has(self.runTemplate.spec.repository) && has(self.runTemplate.spec.model))',
    message: 'without templateRef, runTemplate.spec must set task, repository and model: name a CodingRunTemplate or give the whole run',
    fieldPath: '.runTemplate',
    reason: 'FieldValueRequired',
    holds: (s) =>
      s.templateRef !== undefined ||
      (s.runTemplate?.spec?.task !== undefined && s.runTemplate.spec.repository !== undefined && s.runTemplate.spec.model !== undefined),
  },
];

const labelMap = (what: string) =>
  z.record(z.string().max(317), z.string().max(63)).optional().describe(`${what} copied onto every run the schedule creates.`);

export const runTemplateSpec = z
  .object({
    metadata: z
      .object({
        labels: labelMap('Labels'),
        annotations: z
          .record(z.string().max(317), z.string().max(65_536))
          .optional()
          .describe('Annotations copied onto every run the schedule creates.'),
      })
      .optional()
      .describe('Labels and annotations for the runs. The operator adds chamvi.dev/schedule and chamvi.dev/scheduled-time.'),
    // Replaced in the CRD by the CodingRun spec schema without defaults and required fields
    // (crd.ts): an override must be able to say only what it changes.
    spec: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        'CodingRun spec fields laid over the template (templateRef): objects are merged field by field, any other value (text, number, ' +
          'list) replaces the template\u2019s. The result must be a valid CodingRun spec, or no run is created and the schedule says why.',
      ),
  })
  .describe('The run to create each time, like a CronJob\u2019s jobTemplate.');

export const codingScheduleSpec = z
  .object({
    schedule: z
      .string()
      .min(1)
      .max(256)
      .regex(new RegExp(SCHEDULE_PATTERN), {
        message: 'must be five cron fields (minute hour day-of-month month day-of-week) or @hourly, @daily, ...',
      })
      .describe(
        'When to create a run, in cron format: five fields (minute hour day-of-month month day-of-week), such as "0 3 * * 1-5", ' +
          'or @yearly, @monthly, @weekly, @daily, @hourly. A day matches when day-of-month or day-of-week does, as in cron.',
      ),
    timeZone: z
      .string()
      .min(1)
      .max(64)
      .regex(new RegExp(TIME_ZONE_PATTERN), { message: 'must be an IANA time zone name such as Europe/Berlin' })
      .optional()
      .describe(
        'IANA time zone the schedule is read in, such as Europe/Berlin. Default: UTC. A time skipped by a daylight-saving change runs ' +
          'at the first minute after the gap; a time that happens twice runs once. A schedule whose hour field is * or */n (every ' +
          'hour) follows the clock instead: skipped times do not run, repeated ones run at both occurrences.',
      ),
    concurrencyPolicy: z
      .enum(CONCURRENCY_POLICIES)
      .default('Forbid')
      .describe(
        'What to do when a run is due while an earlier run of this schedule is still active: Allow starts it anyway; Forbid skips ' +
          'this time (it starts when the active run ends if still within startingDeadlineSeconds); Replace cancels the active runs ' +
          '(deletes them) and starts the new one. Default Forbid, since two agents on one repository rarely help.',
      ),
    suspend: z
      .boolean()
      .default(false)
      .describe('True stops creating runs; active runs go on. Times missed while suspended follow startingDeadlineSeconds. Default false.'),
    startingDeadlineSeconds: z
      .number()
      .int()
      // The operator wakes a moment after the scheduled time, later with many schedules due at
      // once: with 0 every run was skipped, and a few seconds skipped runs now and then.
      .min(10)
      .max(31_536_000)
      .optional()
      .describe(
        'A run that cannot start within this many seconds of its scheduled time (the operator was down, the schedule suspended, or ' +
          'Forbid held it) is skipped and reported as a MissedSchedule Event. At least 10. Default: no deadline, so the latest ' +
          'missed time runs late.',
      ),
    successfulRunsHistoryLimit: z
      .number()
      .int()
      .min(0)
      .max(100)
      .default(3)
      .describe('How many Succeeded runs to keep; older ones are deleted. Default 3.'),
    failedRunsHistoryLimit: z
      .number()
      .int()
      .min(0)
      .max(100)
      .default(1)
      .describe('How many Failed or Cancelled runs to keep; older ones are deleted. Default 1.'),
    templateRef: z
      .object({ name: objectName('CodingRunTemplate').describe('Name of a CodingRunTemplate in the schedule\u2019s namespace.') })
      .optional()
      .describe('The CodingRunTemplate the runs start from. Read each time a run is created, so an edit reaches the next run.'),
    runTemplate: runTemplateSpec.optional(),
  })
  .superRefine((spec, ctx) => {
    for (const rule of scheduleRules) if (!rule.holds(spec)) ctx.addIssue({ code: 'custom', message: rule.message, path: ['runTemplate'] });
  })
  .meta({ 'x-kubernetes-validations': celValidations(scheduleRules) })
  .describe('When to create runs, how many may run at once, how many to keep, and what each run is.');

const timestamp = (description: string) => z.string().meta({ format: 'date-time' }).describe(description);

export const SCHEDULE_CONDITION_READY = 'Ready';

/** Active runs status.active lists by name, the newest: a schedule whose runs pile up keeps a status the API server accepts. */
export const SCHEDULE_ACTIVE_LISTED = 1000;

export const codingScheduleStatus = z
  .object({
    observedGeneration: z.number().int().min(0).optional().describe('The .metadata.generation this status was computed from.'),
    active: z
      .array(
        z
          .object({
            name: z.string().max(253).describe('Name of the run.'),
            scheduledTime: timestamp('The scheduled time the run was created for.'),
          })
          .describe('An active run.'),
      )
      .max(SCHEDULE_ACTIVE_LISTED)
      .optional()
      .describe(
        `Runs of this schedule that have not finished: the newest ${SCHEDULE_ACTIVE_LISTED} when there are more (activeCount counts all).`,
      ),
    activeCount: z.number().int().min(0).optional().describe('How many runs of this schedule have not finished (for kubectl get).'),
    lastScheduleTime: timestamp('The scheduled time of the last run created.').optional(),
    lastSuccessfulTime: timestamp('When the last run that Succeeded finished.').optional(),
    lastMissedTime: timestamp('The last scheduled time skipped because it was past startingDeadlineSeconds.').optional(),
    nextScheduleTime: timestamp('The next time a run is due (not set while suspended).').optional(),
    conditions: z
      .array(condition)
      .max(8)
      .optional()
      .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] })
      .describe(
        'Ready: True when the schedule and its run are valid; False with InvalidSchedule, TemplateNotFound, InvalidRunSpec or RunRefused (the API server refused the run due) and a message saying what to fix.',
      ),
  })
  .describe('What the operator observed and did. Written by the operator only.');

export type CodingScheduleSpec = z.output<typeof codingScheduleSpec>;
export type CodingScheduleSpecInput = z.input<typeof codingScheduleSpec>;
export type CodingScheduleStatus = z.output<typeof codingScheduleStatus>;

export interface CodingSchedule {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: CodingScheduleSpecInput;
  status?: CodingScheduleStatus;
}
