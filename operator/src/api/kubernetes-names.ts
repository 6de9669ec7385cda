// Schemas for the Kubernetes-shaped pieces a CodingRun embeds: object names, keys,
// quantities, resource requirements and metav1.Condition. Bounds follow core/v1, so the
// API server and the operator refuse exactly what Kubernetes itself would.
import { z } from 'zod';

const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
const DATA_KEY = '^[-._a-zA-Z0-9]+$';
const QUANTITY = '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$';

export const objectName = (what: string) =>
  z
    .string()
    .min(1)
    .max(253)
    .regex(new RegExp(DNS_SUBDOMAIN))
    .describe(`Name of the ${what} in the run's own namespace (lowercase DNS subdomain).`);

export const dataKey = (what: string, fallback: string) =>
  z.string().min(1).max(253).regex(new RegExp(DATA_KEY)).default(fallback).describe(`Key inside the ${what}. Default "${fallback}".`);

/**
 * A reference to a Secret or ConfigMap key. There is deliberately no namespace field:
 * a run can only use objects in its own namespace (SECURITY.md, cross-namespace secrets).
 */
export const keyReference = (what: string, fallbackKey: string, description: string) =>
  z
    .object({
      name: objectName(what),
      key: dataKey(what, fallbackKey),
    })
    .describe(description);

/**
 * A resource quantity ("500m", "2Gi", 4). In the CRD this becomes an int-or-string with
 * Kubernetes' own quantity pattern; see crd.ts for why it needs special handling.
 */
export const quantity = z
  .union([z.number().int().min(0), z.string().regex(new RegExp(QUANTITY))])
  .meta({ 'x-kubernetes-int-or-string': true, pattern: QUANTITY })
  .describe('A Kubernetes resource quantity, such as "500m", "2Gi" or 4.');

const resourceList = (which: string) =>
  z
    .record(z.string().max(253), quantity)
    // Bounded so the API server can cost the CEL rules that compare whole sandbox specs.
    .meta({ maxProperties: 16 })
    .describe(`${which} per resource name (cpu, memory, ephemeral-storage).`);

export const resourceRequirements = z
  .object({
    limits: resourceList('Maximum amount of compute resources allowed').optional(),
    requests: resourceList('Minimum amount of compute resources required').optional(),
  })
  .describe(
    'Compute resources of the sandbox container (core/v1 ResourceRequirements). Unset values ' +
      'take the operator defaults (requests cpu 250m, memory 512Mi, ephemeral-storage 1Gi; limits cpu 2, ' +
      'memory 4Gi, ephemeral-storage 12Gi); a default request above a limit set here follows it down, ' +
      'a default limit below a request set here follows it up.',
  );

export const condition = z
  .object({
    type: z
      .string()
      .max(316)
      .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/)
      .describe(
        'Type of condition in CamelCase: Accepted, SandboxReady, AwaitingApproval, Ready, Reconciling, Stalled, Succeeded or Failed.',
      ),
    status: z.enum(['True', 'False', 'Unknown']).describe('Status of the condition: True, False or Unknown.'),
    observedGeneration: z.number().int().min(0).optional().describe('The .metadata.generation the condition was set from.'),
    lastTransitionTime: z.string().meta({ format: 'date-time' }).describe('When the condition last changed from one status to another.'),
    reason: z
      .string()
      .min(1)
      .max(1024)
      .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)
      .describe('Machine-readable, CamelCase reason for the last transition.'),
    message: z.string().max(32768).describe('Human-readable message about the transition.'),
  })
  .describe('A metav1.Condition.');
