// The CodingRunTemplate and CodingSchedule CRDs, built from their zod schemas like the
// CodingRun CRD (crd.ts) and written to crds/ by `make crds`. Pure.
import { z } from 'zod';
import { codingRunSpec } from './coding-run-spec.ts';
import {
  codingRunTemplateSpec,
  TEMPLATE_CRD_NAME,
  TEMPLATE_KIND,
  TEMPLATE_PLURAL,
  TEMPLATE_SHORT_NAMES,
  TEMPLATE_SINGULAR,
} from './coding-run-template.ts';
import {
  codingScheduleSpec,
  codingScheduleStatus,
  SCHEDULE_CRD_NAME,
  SCHEDULE_KIND,
  SCHEDULE_PLURAL,
  SCHEDULE_SHORT_NAMES,
  SCHEDULE_SINGULAR,
} from './coding-schedule.ts';
import { toStructural } from './crd.ts';
import { API_VERSION, GROUP, VERSION } from './group.ts';

type JsonSchema = { [key: string]: unknown };

function openApi(schema: z.ZodType): JsonSchema {
  return toStructural(z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input' }) as JsonSchema);
}

/**
 * The run spec as an override: no defaults (the API server would fill them in and they would
 * then hide the template's values), no required fields and no CEL rules (an override names
 * only what it changes; the merged spec is validated whole). List items keep theirs: a
 * list replaces the template's whole, and the keys of a map-list must stay required.
 */
export function toOverrideSchema(node: JsonSchema): JsonSchema {
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === 'default' || key === 'required' || key === 'x-kubernetes-validations') continue;
    if (key === 'properties') {
      out.properties = Object.fromEntries(
        Object.entries(value as Record<string, JsonSchema>).map(([name, child]) => [name, toOverrideSchema(child)]),
      );
    } else out[key] = value;
  }
  return out;
}

export const SCHEDULE_PRINTER_COLUMNS = [
  { name: 'Schedule', type: 'string', jsonPath: '.spec.schedule', description: 'When runs are created (cron).' },
  { name: 'Timezone', type: 'string', jsonPath: '.spec.timeZone', priority: 1, description: 'Time zone of the schedule.' },
  { name: 'Suspend', type: 'boolean', jsonPath: '.spec.suspend', description: 'Whether creating runs is suspended.' },
  { name: 'Active', type: 'integer', jsonPath: '.status.activeCount', description: 'Runs of this schedule not finished yet.' },
  { name: 'Last Schedule', type: 'date', jsonPath: '.status.lastScheduleTime', description: 'Scheduled time of the last run created.' },
  { name: 'Next', type: 'date', jsonPath: '.status.nextScheduleTime', priority: 1, description: 'When the next run is due.' },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

export const TEMPLATE_PRINTER_COLUMNS = [
  { name: 'Repo', type: 'string', jsonPath: '.spec.repository.url', description: 'Repository the runs work on.' },
  { name: 'Provider', type: 'string', jsonPath: '.spec.model.provider', description: 'Model provider.' },
  { name: 'Model', type: 'string', jsonPath: '.spec.model.name', description: 'Model name.' },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

interface CrdParts {
  name: string;
  kind: string;
  plural: string;
  singular: string;
  shortNames: readonly string[];
  description: string;
  printerColumns: object[];
  properties: Record<string, JsonSchema>;
  status: boolean;
  rootValidations?: object[];
}

function crd(parts: CrdParts) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: parts.name, annotations: { 'chamvi.dev/generated-by': 'make crds (operator/src/api); do not edit' } },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        kind: parts.kind,
        listKind: `${parts.kind}List`,
        plural: parts.plural,
        singular: parts.singular,
        shortNames: [...parts.shortNames],
        categories: ['chamvi'],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          ...(parts.status ? { subresources: { status: {} } } : {}),
          additionalPrinterColumns: parts.printerColumns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: parts.description,
              required: ['spec'],
              ...(parts.rootValidations ? { 'x-kubernetes-validations': parts.rootValidations } : {}),
              properties: {
                apiVersion: { type: 'string', description: API_VERSION },
                kind: { type: 'string', description: parts.kind },
                metadata: { type: 'object' },
                ...parts.properties,
              },
            },
          },
        },
      ],
    },
  };
}

export function buildCodingRunTemplateCrd() {
  return crd({
    name: TEMPLATE_CRD_NAME,
    kind: TEMPLATE_KIND,
    plural: TEMPLATE_PLURAL,
    singular: TEMPLATE_SINGULAR,
    shortNames: TEMPLATE_SHORT_NAMES,
    description:
      'A CodingRunTemplate is a reusable CodingRun spec in one namespace. A CodingSchedule names it in spec.templateRef and ' +
      'sets what differs (often just the task); each run copies the merged spec when it is created.',
    printerColumns: TEMPLATE_PRINTER_COLUMNS,
    properties: { spec: openApi(codingRunTemplateSpec) },
    status: false,
  });
}

export function buildCodingScheduleCrd() {
  const spec = openApi(codingScheduleSpec);
  const runTemplate = (spec.properties as Record<string, JsonSchema>).runTemplate!;
  const runProperties = runTemplate.properties as Record<string, JsonSchema>;
  const overrides = toOverrideSchema(openApi(codingRunSpec));
  // A schedule names its template itself (spec.templateRef); a run it creates is already merged.
  delete (overrides.properties as Record<string, JsonSchema>).templateRef;
  runProperties.spec = { ...overrides, description: runProperties.spec!.description };
  return crd({
    name: SCHEDULE_CRD_NAME,
    kind: SCHEDULE_KIND,
    plural: SCHEDULE_PLURAL,
    singular: SCHEDULE_SINGULAR,
    shortNames: SCHEDULE_SHORT_NAMES,
    description:
      'A CodingSchedule creates CodingRuns on a cron schedule, like a CronJob creates Jobs: each run is named after the schedule ' +
      'and its time (<schedule>-<minutes since the epoch>), owned by it, and labelled chamvi.dev/schedule and chamvi.dev/scheduled-time.',
    printerColumns: SCHEDULE_PRINTER_COLUMNS,
    properties: { spec, status: openApi(codingScheduleStatus) },
    status: true,
    // The name is a label value on every run (chamvi.dev/schedule), and labels stop at 63.
    rootValidations: [
      {
        rule: 'size(self.metadata.name) <= 63',
        message: 'a CodingSchedule name may have at most 63 characters: it labels every run the schedule creates',
        reason: 'FieldValueInvalid',
      },
    ],
  });
}
