// Schemas for the Kubernetes-shaped pieces a CodingRun embeds: object names, keys,
// quantities, resource requirements and metav1.Condition. Bounds follow core/v1, so the
// API server and the operator refuse exactly what Kubernetes itself would.
import { z } from 'zod';
import { quantityValue } from './resource-quantity.ts';
import { celValidations, type CrossFieldRule } from './cross-field-rules.ts';

const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
const DATA_KEY = '^[-._a-zA-Z0-9]+$';
// Kubernetes' quantity pattern without its leading sign: no resource a sandbox may ask for
// can be negative, and a pod asking for one is refused (422) only after the run was accepted.
// An exponent of at most three digits (1e-400 is as small as a quantity gets): Kubernetes' own
// quantity parser, which CEL's isQuantity() and quantity() call, spent minutes of an API server
// core and hundreds of MiB on `1e2147483648`, for one create of a run by anyone who may create
// one. Written without backslashes, so the same text is a CEL string literal (guardedQuantity).
const QUANTITY = '^([0-9]+([.][0-9]*)?|[.][0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,3})?$';

const QUANTITY_PATTERN = new RegExp(QUANTITY);

// Far above any size a pod asks for; bounded so the API server can cost the CEL rule that
// compares a request with its limit (requestWithinLimitRule).
const QUANTITY_MAX_LENGTH = 64;

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
 * A resource quantity ("500m", "2Gi", 4), never negative. In the CRD this becomes an
 * int-or-string with Kubernetes' own quantity pattern (unsigned); see crd.ts for why it needs
 * special handling. The pattern only checks strings, so `minimum` bounds an integer.
 */
export const quantity = z
  .union([z.number().int().min(0), z.string().max(QUANTITY_MAX_LENGTH).regex(QUANTITY_PATTERN)])
  .meta({ 'x-kubernetes-int-or-string': true, pattern: QUANTITY, minimum: 0, maxLength: QUANTITY_MAX_LENGTH })
  .describe('A Kubernetes resource quantity, not negative, such as "500m", "2Gi" or 4.');

/** The resources a sandbox may ask for. */
export const SANDBOX_RESOURCE_NAMES = ['cpu', 'memory', 'ephemeral-storage'] as const;

/** SANDBOX_RESOURCE_NAMES as a CEL list literal, for the rules below. */
const SANDBOX_RESOURCE_NAMES_CEL = `[${SANDBOX_RESOURCE_NAMES.map((name) => `'${name}'`).join(', ')}]`;

/**
 * Only the core resources. An extended resource (nvidia.com/gpu) would let whoever may create
 * CodingRuns get GPU nodes through the operator's ServiceAccount, and an unknown name made a pod
 * the API server refuses after the run was accepted. No operator setting opens others.
 */
export const resourceNameRule: CrossFieldRule<Record<string, unknown>> = {
  rule: `self.all(name, name in ${SANDBOX_RESOURCE_NAMES_CEL})`,
  message: `resource names may only be ${SANDBOX_RESOURCE_NAMES.slice(0, -1).join(', ')} and ${SANDBOX_RESOURCE_NAMES.at(-1)}`,
  reason: 'FieldValueInvalid',
  holds: (list) => Object.keys(list).every((name) => (SANDBOX_RESOURCE_NAMES as readonly string[]).includes(name)),
};

/**
 * Above zero, by the digits before any suffix: Kubernetes rounds a quantity that is not zero up
 * to 1n, so "1e-400" is above zero for the API server too, where a float would make it 0.
 */
export const quantityAboveZero = (value: string | number) =>
  typeof value === 'number' ? value > 0 : /[1-9]/.test(/^[0-9.]*/.exec(value)![0]);

/**
 * CEL: whether `value` (a CEL string expression) is a quantity, asking Kubernetes' parser only
 * once the pattern above holds. The schema's pattern does not keep a rule from running on a
 * value it refuses, and the parser alone spent minutes on a long exponent (QUANTITY says why).
 */
const guardedQuantity = (value: string) => `(${value}.matches('${QUANTITY}') && isQuantity(${value}))`;

/**
 * A limit of 0 is no limit: the kubelet sets no memory limit and no CFS quota for it, and a
 * ResourceQuota on limits.* (or a LimitRange max) counts the pod as 0, so a run author got,
 * through the operator's ServiceAccount, a pod that could use a whole node outside the
 * namespace's quota. Limits only: a request of 0 asks for nothing, which a quota counts right.
 */
export const limitAboveZeroRule: CrossFieldRule<Record<string, string | number>> = {
  // Over the names a sandbox may ask for, not over the map: fewer steps for the API server to cost.
  rule:
    `${SANDBOX_RESOURCE_NAMES_CEL}.all(name, !(name in self) || !${guardedQuantity('string(self[name])')} || ` +
    "quantity(string(self[name])).compareTo(quantity('0')) > 0)",
  message:
    'each limit must be above zero (Kubernetes reads a zero limit as none, outside the namespace quota); raise it, or leave it out for the default',
  reason: 'FieldValueInvalid',
  // What is no quantity is the pattern's to refuse, with its own message (CEL skips it too).
  holds: (list) => Object.values(list).every((value) => !QUANTITY_PATTERN.test(String(value)) || quantityAboveZero(value)),
};

const resourceList = (which: string, note: string, rules: readonly CrossFieldRule<Record<string, string | number>>[]) =>
  rules
    .reduce(
      (list, { holds, message }) => list.refine(holds, { message }),
      z.record(z.string().max(253), quantity).refine(resourceNameRule.holds, { message: resourceNameRule.message }),
    )
    // Bounded so the API server can cost the CEL rules that compare whole sandbox specs.
    .meta({ maxProperties: 16, 'x-kubernetes-validations': celValidations([resourceNameRule, ...rules]) })
    .describe(`${which} per resource name: ${SANDBOX_RESOURCE_NAMES.join(', ')}; no other. ${note}`);

type ResourceLists = { requests?: Record<string, string | number>; limits?: Record<string, string | number> };

/** A above b, as quantities; a float's rounding (700m is 0.7000000000000001) is no difference. */
const quantityAbove = (a: string | number, b: string | number) => {
  const [left, right] = [quantityValue(a), quantityValue(b)];
  return left !== undefined && right !== undefined && left - right > Math.abs(right) * 1e-12;
};

/**
 * A request above its limit passed apply and made a pod the API server refuses (422), so the
 * run failed SandboxInvalid after it was accepted. Only values the run sets on both sides: an
 * operator default never contradicts one the run gives (sandbox-pod.ts mergeResources).
 */
export const requestWithinLimitRule: CrossFieldRule<ResourceLists> = {
  // Over the names a sandbox may ask for, not over the maps: fewer steps for the API server to cost.
  rule:
    `!has(self.requests) || !has(self.limits) || ${SANDBOX_RESOURCE_NAMES_CEL}.all(name, ` +
    '!(name in self.requests) || !(name in self.limits) || ' +
    `!${guardedQuantity('string(self.requests[name])')} || !${guardedQuantity('string(self.limits[name])')} || ` +
    'quantity(string(self.requests[name])).compareTo(quantity(string(self.limits[name]))) <= 0)',
  message: 'each request may be at most its limit (the API server refuses such a pod); lower the request or raise the limit',
  fieldPath: '.requests',
  reason: 'FieldValueInvalid',
  holds: ({ requests, limits }) =>
    Object.entries(requests ?? {}).every(([name, request]) => limits?.[name] === undefined || !quantityAbove(request, limits[name]!)),
};

export const resourceRequirements = z
  .object({
    limits: resourceList('Maximum amount of compute resources allowed', 'Each must be above zero: Kubernetes reads a zero limit as none.', [
      limitAboveZeroRule,
    ]).optional(),
    requests: resourceList('Minimum amount of compute resources required', 'A request may be 0.', []).optional(),
  })
  .refine(requestWithinLimitRule.holds, { message: requestWithinLimitRule.message, path: ['requests'] })
  .meta({ 'x-kubernetes-validations': celValidations([requestWithinLimitRule]) })
  .describe(
    'Compute resources of the sandbox container (core/v1 ResourceRequirements). Unset values ' +
      'take the operator defaults (requests cpu 250m, memory 512Mi, ephemeral-storage 1Gi; limits cpu 2, ' +
      'memory 4Gi, ephemeral-storage 12Gi); a default request above a limit set here follows it down, ' +
      'a default limit below a request set here follows it up. A request set here may not be above a limit set here, ' +
      'and a limit must be above zero (Kubernetes reads a zero limit as none, and a namespace quota counts it as 0).',
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
