// Builds the CodingRun CustomResourceDefinition from the zod schemas. Pure: `make crds`
// writes its YAML to crds/, and a unit test fails when the committed file is stale.
//
// zod's OpenAPI 3.0 output is close to a Kubernetes structural schema but not equal;
// `toStructural` closes the gaps (see its comments). The API server is the judge: an
// integration test applies the result to a real one.
import { z } from 'zod';
import { API_VERSION, GROUP, KIND, PLURAL, SHORT_NAMES, SINGULAR, VERSION } from './group.ts';
import { codingRunSpec, TEMPLATE_FILLED_FIELDS } from './coding-run-spec.ts';
import { codingRunStatus } from './coding-run-status.ts';
import { re2Pattern } from './portable-pattern.ts';

type JsonSchema = { [key: string]: unknown };

export const CRD_NAME = `${PLURAL}.${GROUP}`;

export const PRINTER_COLUMNS = [
  { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Where the run is.' },
  { name: 'Steps', type: 'integer', jsonPath: '.status.steps', description: 'Model calls made so far.' },
  { name: 'Tokens', type: 'integer', jsonPath: '.status.usage.totalTokens', description: 'Total tokens the provider reported.' },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  { name: 'Repo', type: 'string', jsonPath: '.spec.repository.url', priority: 1, description: 'Repository the run works on.' },
  { name: 'Reason', type: 'string', jsonPath: '.status.reason', priority: 1, description: 'Why the run failed or was cancelled.' },
  {
    name: 'Verified',
    type: 'boolean',
    jsonPath: '.status.result.verification.passed',
    priority: 1,
    description: 'Whether spec.verify passed.',
  },
  {
    name: 'Queue',
    type: 'integer',
    jsonPath: '.status.queue.position',
    priority: 1,
    description: 'Place of a queued run in the order the next free sandbox slots go (1 is next).',
  },
  // A run naming a template may have no spec.repository of its own (Repo is then empty).
  {
    name: 'Template',
    type: 'string',
    jsonPath: '.spec.templateRef.name',
    priority: 1,
    description: 'The CodingRunTemplate the run starts from, if any.',
  },
];

function openApi(schema: z.ZodType): JsonSchema {
  return toStructural(z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input' }) as JsonSchema);
}

/** Rewrites zod's JSON Schema into what a CRD accepts, recursively. */
export function toStructural(node: JsonSchema): JsonSchema {
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    // A CRD carries no $schema, and structural schemas forbid additionalProperties beside properties.
    if (key === '$schema') continue;
    if (key === 'additionalProperties' && value === false) continue;
    // A loose object kept as written (x-kubernetes-preserve-unknown-fields) needs no schema for its other fields.
    if ((key === 'additionalProperties' || key === 'properties') && node['x-kubernetes-preserve-unknown-fields'] === true) {
      if (Object.keys(value as object).length === 0) continue;
    }
    // zod bounds every integer to the safe range; Kubernetes needs no such noise.
    if ((key === 'minimum' || key === 'maximum') && Math.abs(value as number) === Number.MAX_SAFE_INTEGER) continue;
    // The API server reads a pattern with RE2, which has no \uXXXX (portable-pattern.ts).
    if (key === 'pattern' && typeof value === 'string') {
      out[key] = re2Pattern(value);
      continue;
    }
    out[key] = transform(value);
  }
  // int-or-string (resource quantities): Kubernetes allows exactly this anyOf shape, with
  // no further constraints inside the branches.
  if (out['x-kubernetes-int-or-string'] === true) {
    out.anyOf = [{ type: 'integer' }, { type: 'string' }];
    delete out.type;
  }
  return out;
}

/**
 * The run spec as the API server stores it: without the defaults the zod schema fills in. A
 * run that names a template (spec.templateRef) must be stored as written, or the API
 * server's defaults (budget.maxSteps 40, every tool allowed, ...) would hide the template's
 * values from the merge. The operator, its workers and the egress proxy read every spec
 * through the zod schema, which applies the same defaults, so a plain run behaves as before;
 * `kubectl explain` still states each default in its description. List items keep theirs: a
 * list is replaced whole, never merged. The fields a template may fill are required by CEL
 * (templateRefRules) instead of `required`.
 */
export function toStoredRunSpec(node: JsonSchema, top = true, keepDefaults = false): JsonSchema {
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === 'default' && !keepDefaults) continue;
    if (key === 'properties') {
      out.properties = Object.fromEntries(
        Object.entries(value as Record<string, JsonSchema>).map(([name, child]) => [name, toStoredRunSpec(child, false, keepDefaults)]),
      );
    } else if (key === 'required' && top) {
      const required = (value as string[]).filter((name) => !(TEMPLATE_FILLED_FIELDS as readonly string[]).includes(name));
      if (required.length > 0) out.required = required;
    } else out[key] = value;
  }
  return out;
}

/** The spec as the CRD has it, with the defaults the operator's parse applies: for docs/api-reference.md. */
export const documentedRunSpec = (): JsonSchema => toStoredRunSpec(openApi(codingRunSpec), true, true);

function transform(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(transform);
  if (value && typeof value === 'object') return toStructural(value as JsonSchema);
  return value;
}

export function buildCodingRunCrd() {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: CRD_NAME,
      annotations: { 'chamvi.dev/generated-by': 'make crds (operator/src/api); do not edit' },
    },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        kind: KIND,
        listKind: `${KIND}List`,
        plural: PLURAL,
        singular: SINGULAR,
        shortNames: [...SHORT_NAMES],
        categories: ['chamvi'],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: PRINTER_COLUMNS,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description:
                'A CodingRun asks the operator to run a coding agent on a repository in a locked-down sandbox pod ' +
                'and report its progress, token usage and diff.',
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string', description: `${API_VERSION}` },
                kind: { type: 'string', description: KIND },
                metadata: { type: 'object' },
                spec: toStoredRunSpec(openApi(codingRunSpec)),
                // A run the operator has not seen yet reads as observedGeneration 0 (the API
                // server applies this default whenever it reads the object), so kstatus and
                // Flux see it in progress rather than Current before the first status write.
                status: { ...openApi(codingRunStatus), default: { observedGeneration: 0 } },
              },
            },
          },
        },
      ],
    },
  };
}
