// Builds the CodingEval CustomResourceDefinition from the zod schemas in coding-eval.ts, with
// the same structural rewrite as the CodingRun CRD (crd.ts). `make crds` writes it to crds/.
import { z } from 'zod';
import { API_VERSION, GROUP } from './group.ts';
import { toStructural } from './crd.ts';
import { EVAL_KIND, EVAL_PLURAL, EVAL_SHORT_NAMES, EVAL_SINGULAR, codingEvalSpec, codingEvalStatus } from './coding-eval.ts';

type JsonSchema = { [key: string]: unknown };

export const EVAL_CRD_NAME = `${EVAL_PLURAL}.${GROUP}`;

export const EVAL_PRINTER_COLUMNS = [
  { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Running, Complete or Failed.' },
  { name: 'Planned', type: 'integer', jsonPath: '.status.planned', description: 'tasks × models × attempts.' },
  { name: 'Graded', type: 'integer', jsonPath: '.status.graded', description: 'Attempts graded so far.' },
  { name: 'Passed', type: 'integer', jsonPath: '.status.passes', description: 'Attempts passed so far.' },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  { name: 'Message', type: 'string', jsonPath: '.status.message', priority: 1, description: 'Where the eval is.' },
];

const openApi = (schema: z.ZodType): JsonSchema =>
  toStructural(z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input' }) as JsonSchema);

export function buildCodingEvalCrd() {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: EVAL_CRD_NAME,
      annotations: { 'chamvi.dev/generated-by': 'make crds (operator/src/api); do not edit' },
    },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        kind: EVAL_KIND,
        listKind: `${EVAL_KIND}List`,
        plural: EVAL_PLURAL,
        singular: EVAL_SINGULAR,
        shortNames: [...EVAL_SHORT_NAMES],
        categories: ['chamvi'],
      },
      versions: [
        {
          name: API_VERSION.split('/')[1]!,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: EVAL_PRINTER_COLUMNS,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description:
                'A CodingEval runs every task × model × attempts as CodingRuns it owns, grades each finished run with ' +
                'deterministic graders and reports pass rate, pass@k, tokens and duration per task and model.',
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string', description: API_VERSION },
                kind: { type: 'string', description: EVAL_KIND },
                metadata: { type: 'object' },
                spec: openApi(codingEvalSpec),
                status: openApi(codingEvalStatus),
              },
            },
          },
        },
      ],
    },
  };
}
