// The run-owners policy (charts/chamvi-operator/templates/approval-policy.yaml) names a
// CodingSchedule's or CodingRunTemplate's writer anew only when a field that carries the task
// changes: CEL cannot take fields out of an object, so the policy lists them by name. These
// tests fail when the CRDs gain a field the list does not place, so a new field that carries
// the task cannot slip past separation of duties unnoticed (its writer could then approve the
// runs it shapes).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { codingRunTemplateSpec } from '../../operator/src/api/coding-run-template.ts';
import { codingScheduleSpec } from '../../operator/src/api/coding-schedule.ts';

const policy = readFileSync(new URL('../../charts/chamvi-operator/templates/approval-policy.yaml', import.meta.url), 'utf8');

/** The field lists of the specWritten variable: the schedule's, then the template's. */
function listedTaskFields(): { schedule: string[]; template: string[] } {
  const variable = policy.slice(policy.indexOf('- name: specWritten'));
  const lists = [...variable.matchAll(/list ((?:"[A-Za-z]+" ?)+)/g)]
    .slice(0, 2)
    .map((match) => [...match[1]!.matchAll(/"([A-Za-z]+)"/g)].map((each) => each[1]!));
  expect(lists).toHaveLength(2);
  return { schedule: lists[0]!, template: lists[1]! };
}

const keysOf = (schema: unknown) => Object.keys((schema as { shape: Record<string, unknown> }).shape).sort();

// How and when runs are made, not what they do: changing these does not make one the task's writer.
const SCHEDULE_OPERATIONAL = [
  'schedule',
  'timeZone',
  'concurrencyPolicy',
  'suspend',
  'startingDeadlineSeconds',
  'successfulRunsHistoryLimit',
  'failedRunsHistoryLimit',
];
const TEMPLATE_OPERATIONAL = ['budget', 'ttlSecondsAfterFinished'];

describe('the run-owners policy names a new writer only for the fields that carry the task', () => {
  it("compares a CodingSchedule's runTemplate and templateRef, and places every other field of its spec as operational", () => {
    const { schedule } = listedTaskFields();
    expect(schedule.sort()).toEqual(['runTemplate', 'templateRef']);
    expect(keysOf(codingScheduleSpec)).toEqual([...schedule, ...SCHEDULE_OPERATIONAL].sort());
  });

  it("compares every field of a CodingRunTemplate's spec but budget and ttlSecondsAfterFinished", () => {
    const { template } = listedTaskFields();
    expect(template.filter((field) => TEMPLATE_OPERATIONAL.includes(field))).toEqual([]);
    expect(keysOf(codingRunTemplateSpec)).toEqual([...template, ...TEMPLATE_OPERATIONAL].sort());
  });
});
