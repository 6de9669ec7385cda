// CodingRunTemplate: a namespaced, reusable run spec. A CodingSchedule names one and lays its
// own run fields over it (merge-run-spec.ts); the result is then parsed exactly like a plain
// CodingRun's spec, so a template can never start a run a plain manifest could not.
import { type z } from 'zod';
import { codingRunSpecFields } from './coding-run-spec.ts';
import { GROUP } from './group.ts';

export const TEMPLATE_KIND = 'CodingRunTemplate';
export const TEMPLATE_PLURAL = 'codingruntemplates';
export const TEMPLATE_SINGULAR = 'codingruntemplate';
export const TEMPLATE_SHORT_NAMES = ['crt'] as const;
export const TEMPLATE_CRD_NAME = `${TEMPLATE_PLURAL}.${GROUP}`;

/**
 * A run spec in which task, repository and model may be left for the user of the template.
 * It is made from the fields alone, without the run's cross-field and transition rules: a template may be edited at any time, and
 * an edit reaches only runs created after it.
 */
export const codingRunTemplateSpec = codingRunSpecFields
  .partial({ task: true, repository: true, model: true, instructions: true, continueFrom: true, ttlSecondsAfterFinished: true })
  .describe(
    'The same fields as a CodingRun spec, with the same defaults and rules; task, repository and model may be left for the ' +
      'CodingSchedule that uses the template to set. Runs copy the template when they are created: a later edit reaches only later runs.',
  );

export type CodingRunTemplateSpec = z.input<typeof codingRunTemplateSpec>;

export interface CodingRunTemplate {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    annotations?: Record<string, string>;
  };
  spec: CodingRunTemplateSpec;
}
