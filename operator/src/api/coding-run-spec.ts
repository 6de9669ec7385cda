// The CodingRun spec: what a user asks for. The zod schema is the single source of truth:
// the CRD's OpenAPI schema (descriptions, defaults, bounds, CEL rules) is generated from it
// by `make crds`, and the operator parses every run with it before acting.
import { z } from 'zod';
import { celValidations, type CrossFieldRule } from './cross-field-rules.ts';
import { DURATION_PATTERN, durationMs, parseDuration } from './duration.ts';
import { REF_NAME_CHARACTERS_MESSAGE, REF_NAME_PATTERN, REF_NAME_RULES, ruledString } from './git-ref-name.ts';
import { EGRESS_ALLOW_MAX, EGRESS_PATTERN, EGRESS_PATTERN_MAX, EGRESS_PATTERN_MESSAGE } from './egress-pattern.ts';
import { keyReference, objectName, resourceRequirements } from './kubernetes-names.ts';
import { PROVIDER_NAMES } from './providers.ts';
import { publishCredentialsRule, publishSpec } from './publish-spec.ts';
import { TOOL_NAMES } from './tool-names.ts';
import { verifySpec } from './verify-spec.ts';
import { NOT_WHITESPACE, WHITESPACE_CHARACTERS } from './portable-pattern.ts';

// A value git could read as an option (`--upload-pack=...`) never reaches the schema's
// happy path; whether a URL is allowed at all is the operator's allowRepo check. Whitespace is
// spelt for both regex engines (portable-pattern.ts), not as \s.
const NOT_OPTION_LIKE = `^[^-${WHITESPACE_CHARACTERS}]${NOT_WHITESPACE}*$`;

/** Longest spec.budget.timeout: 30 days. */
export const BUDGET_TIMEOUT_MAX = '720h';
/** Longest spec.approval.timeout: a week. */
export const APPROVAL_TIMEOUT_MAX = '168h';

/**
 * A duration of at least 1ms and at most `max`. Unbounded, a timeout the schema let through
 * could make a pod the API server refuses (activeDeadlineSeconds is at most 2^31 - 1 s, and the
 * sandbox's is budget.timeout plus maxSteps approval waits): the run then waited Pending for
 * ever. Zero means nothing useful (a pod and a clone only to end DeadlineExceeded, every gated
 * call denied at once). The floor is 1ms, not "above 0s", because the operator counts whole
 * milliseconds: CEL would take 0.0001s, which the operator reads as 0 and refuses after the run
 * was accepted. What is left (CEL refuses 0.5ms, which the operator rounds to 1) refuses at apply.
 */
const duration = (description: string, fallback: string, max: string) => {
  const positive: CrossFieldRule<string> = {
    rule: `duration(self) >= duration('1ms')`,
    message: 'must be at least 1ms',
    reason: 'FieldValueInvalid',
    holds: (text) => (parseDuration(text) ?? 0) >= 1,
  };
  const bounded: CrossFieldRule<string> = {
    rule: `duration(self) <= duration('${max}')`,
    message: `must be at most ${max}`,
    reason: 'FieldValueInvalid',
    holds: (text) => (parseDuration(text) ?? 0) <= durationMs(max),
  };
  return z
    .string()
    .max(64)
    .regex(new RegExp(DURATION_PATTERN), { message: 'must be a duration such as 90s, 30m or 1h30m' })
    .refine(positive.holds, { message: positive.message })
    .refine(bounded.holds, { message: bounded.message })
    .meta({ 'x-kubernetes-validations': celValidations([positive, bounded]) })
    .default(fallback)
    .describe(`${description} A duration such as 90s, 30m or 1h30m (units ms, s, m, h), from 1ms to ${max}. Default ${fallback}.`);
};

const toolName = z.enum(TOOL_NAMES).describe('A coding tool name.');

export const repositorySpec = z
  .object({
    url: z
      .string()
      .min(1)
      .max(2048)
      .regex(new RegExp(NOT_OPTION_LIKE), { message: 'must be a repository URL without spaces that does not start with "-"' })
      .describe(
        'Git URL of the repository to work on, such as https://github.com/acme/webapp.git. ' +
          "It must match one of the operator's allowRepo patterns, or the run fails with RepoNotAllowed.",
      ),
    // A git ref name and nothing more: the worker fetches it, and git reads a fetch's argument
    // as a refspec (git-ref-name.ts says what `a:b` and `*` did).
    revision: ruledString(REF_NAME_PATTERN, REF_NAME_CHARACTERS_MESSAGE, REF_NAME_RULES)
      .optional()
      .describe(
        'Branch, tag or full commit id to check out, such as main, v1.2.3, refs/pull/12/head or a 40-hex commit. ' +
          'A git ref name: printable ASCII without spaces or ~ ^ : ? * [ \\, no "..", "//" or "@{", no part starting with "." ' +
          'or ending in ".lock", not starting with "-" or "+". Default: the remote HEAD.',
      ),
    credentialsSecretRef: keyReference(
      'Secret',
      'token',
      "Secret in the run's own namespace holding a token for cloning a private repository. " +
        'It is used by the operator for the clone and never enters the sandbox.',
    ).optional(),
  })
  .describe('The repository the agent works on. It is cloned by the operator and copied into the sandbox.');

type ModelInput = { provider: string; name?: string; baseURL?: string; apiKeySecretRef?: unknown; scriptRef?: unknown };

export const modelRules: readonly CrossFieldRule<ModelInput>[] = [
  {
    rule: "self.provider != 'openai-compatible' || has(self.baseURL)",
    message: 'baseURL is required when provider is openai-compatible: set it to the endpoint, such as https://llm.internal/v1',
    fieldPath: '.baseURL',
    reason: 'FieldValueRequired',
    holds: (m) => m.provider !== 'openai-compatible' || m.baseURL !== undefined,
  },
  {
    rule: "!has(self.baseURL) || self.provider == 'openai-compatible'",
    message: 'baseURL may only be set with provider openai-compatible; the other providers have fixed endpoints',
    fieldPath: '.baseURL',
    reason: 'FieldValueForbidden',
    holds: (m) => m.baseURL === undefined || m.provider === 'openai-compatible',
  },
  {
    rule: "self.provider == 'scripted' || has(self.apiKeySecretRef)",
    message: 'apiKeySecretRef is required for every provider except scripted: name a Secret in this namespace that holds the API key',
    fieldPath: '.apiKeySecretRef',
    reason: 'FieldValueRequired',
    holds: (m) => m.provider === 'scripted' || m.apiKeySecretRef !== undefined,
  },
  {
    rule: "!has(self.apiKeySecretRef) || self.provider != 'scripted'",
    message: 'apiKeySecretRef may not be set with provider scripted, which calls no model',
    fieldPath: '.apiKeySecretRef',
    reason: 'FieldValueForbidden',
    holds: (m) => m.apiKeySecretRef === undefined || m.provider !== 'scripted',
  },
  {
    rule: "self.provider != 'scripted' || has(self.scriptRef)",
    message: 'scriptRef is required with provider scripted: name the ConfigMap key that holds the script',
    fieldPath: '.scriptRef',
    reason: 'FieldValueRequired',
    holds: (m) => m.provider !== 'scripted' || m.scriptRef !== undefined,
  },
  {
    rule: "!has(self.scriptRef) || self.provider == 'scripted'",
    message: 'scriptRef may only be set with provider scripted',
    fieldPath: '.scriptRef',
    reason: 'FieldValueForbidden',
    holds: (m) => m.scriptRef === undefined || m.provider === 'scripted',
  },
  {
    rule: "self.provider == 'scripted' || has(self.name)",
    message: 'name is required for this provider: set the model name, such as gpt-5.6',
    fieldPath: '.name',
    reason: 'FieldValueRequired',
    holds: (m) => m.provider === 'scripted' || m.name !== undefined,
  },
];

const modelObject = z.object({
  provider: z
    .enum(PROVIDER_NAMES)
    .describe(
      'Who serves the model: openai (Responses API), openai-compatible (any endpoint at baseURL), ' +
        'deepseek, openrouter, groq, xai, moonshot, or scripted (replays a script from a ConfigMap; no key, no cost).',
    ),
  name: z
    .string()
    .min(1)
    .max(256)
    .optional()
    .describe('Model name at the provider, such as gpt-5.6. Required unless provider is scripted.'),
  baseURL: z
    .string()
    .max(2048)
    .regex(new RegExp(`^https?://${NOT_WHITESPACE}+$`), { message: 'must be an http(s) URL' })
    .optional()
    .describe('Endpoint of an OpenAI-compatible API, such as https://llm.internal/v1. Only and always with provider openai-compatible.'),
  apiKeySecretRef: keyReference(
    'Secret',
    'apiKey',
    "Secret in the run's own namespace holding the provider's API key. Required for every provider except scripted. " +
      'The key is read by the operator for each model call and never enters the sandbox.',
  ).optional(),
  scriptRef: keyReference(
    'ConfigMap',
    'script.json',
    'ConfigMap key in the run\'s own namespace holding the JSON script the scripted provider replays ({"turns": [...]}, at most 10000 turns). Only and always with provider scripted.',
  ).optional(),
  contextWindow: z
    .number()
    .int()
    .min(1024)
    .max(10_000_000)
    .default(128_000)
    .describe(
      'Context window of the model in tokens. Older turns are summarised when the conversation, tool definitions included, nears it, and once more at once when the provider answers that the context is too long. ' +
        "At most the operator's maxContextWindow (1000000 unless the admin sets another), else InvalidSpec. Default 128000.",
    ),
  images: z
    .boolean()
    .optional()
    .describe(
      'Whether the model accepts images: read_file then shows it a png, jpeg, gif or webp up to 1 MiB as an image; otherwise it gets a short text ' +
        '(media type, size, dimensions). Unset: the operator decides by provider and model name (openai gpt-4o, gpt-4.1, gpt-5, o3, o4; ' +
        'openai-compatible and openrouter names with gpt-4o, gpt-5, claude, gemini, vision, llava, pixtral or -vl). Set false when an endpoint refuses images.',
    ),
});

export const modelSpec = modelObject
  .superRefine((model, ctx) => {
    for (const rule of modelRules) {
      if (!rule.holds(model))
        ctx.addIssue({ code: 'custom', message: rule.message, path: rule.fieldPath ? [rule.fieldPath.slice(1)] : [] });
    }
  })
  .meta({ 'x-kubernetes-validations': celValidations(modelRules) })
  .describe('The model that drives the agent and how to reach it.');

export const toolsSpec = z
  .object({
    allow: z
      .array(toolName)
      .max(TOOL_NAMES.length)
      .default([...TOOL_NAMES])
      .meta({ 'x-kubernetes-list-type': 'set' })
      .describe(`Tools the model may call. Default: all of ${TOOL_NAMES.join(', ')}.`),
  })
  .describe('Which coding tools the agent may use.');

export const approvalSpec = z
  .object({
    tools: z
      .array(toolName)
      .max(TOOL_NAMES.length)
      .default([])
      .meta({ 'x-kubernetes-list-type': 'set' })
      .describe('Calls of these tools wait for a human to approve or deny them (kubectl codingrun approve|deny). Default: none.'),
    timeout: duration('How long a call waits for an answer; after it the call is denied and the run goes on.', '24h', APPROVAL_TIMEOUT_MAX),
    publish: z
      .boolean()
      .optional()
      .describe(
        'With spec.publish: before anything is pushed the run waits in WaitingForApproval, its pendingApproval (tool "publish") ' +
          "showing the branch, base, title and the diff's files (each with its kind, a rename's old path and a special or changed mode) and line counts; answer with kubectl codingrun approve|deny as for a " +
          'tool call. A deny, or no answer within timeout, ends the run Succeeded without publishing and says why. Default: no approval.',
      ),
  })
  .describe('Which tool calls, and whether publishing the result, need a human approval first.');

export const budgetSpec = z
  .object({
    maxSteps: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(40)
      .describe(
        'Most model calls the run may make (a step is one model call and its tool calls). 1 to 1000, default 40. Past it the run fails with BudgetExceeded and keeps its partial diff.',
      ),
    maxTokens: z
      .number()
      .int()
      .min(1)
      .max(1_000_000_000)
      .optional()
      .describe(
        'Most tokens (input plus output, as the provider reports them) the run may use. Past it the run fails with BudgetExceeded. Default: no limit.',
      ),
    timeout: duration(
      'Wall-clock time from the start of the run to its end. Past it the run fails with DeadlineExceeded and keeps its partial diff.',
      '30m',
      BUDGET_TIMEOUT_MAX,
    ),
  })
  .describe(
    'Limits on the run. May be changed while the run is active; the change applies at the next step. ' +
      'A raise cannot outlast the sandbox pod, whose time limit is set from the budget when the pod is made (Kubernetes cannot extend it): ' +
      'the run then ends a little before that limit, keeping its diff, and a TimeoutBeyondSandbox Event says when. Create a new run (continueFrom) for more time.',
  );

/**
 * Names the sandbox's toolbox keeps for itself: CHAMVI_WORKSPACE=/ broke the import, CHAMVI_HOME
 * under /workspace put its logs in the diff. Everything else stays the run's, for its commands:
 * HOME, TMPDIR and PATH (the toolbox finds its own git, rg and bash outside the workspace and
 * runs its git without HOME or GIT_*: helper-programs.ts; the operator execs node by absolute
 * path: toolboxCommand), and NODE_OPTIONS (a larger heap for jest or tsc is common, and stored
 * runs use it), LD_* and the other variables node and the loader read at start, which the pod
 * holds back from the toolbox and gives to bash only (contract/held-environment.ts). run --local
 * refuses more, for there the toolbox runs on the user's machine: local-env-names.ts.
 */
export const envNameRule: CrossFieldRule<{ name: string }> = {
  rule: "!self.name.startsWith('CHAMVI_')",
  message:
    "may not start with CHAMVI_: the sandbox's toolbox reads those for its own settings (its workspace, its logs). Rename the variable",
  fieldPath: '.name',
  reason: 'FieldValueForbidden',
  holds: ({ name }) => !name.startsWith('CHAMVI_'),
};

const envVar = z
  .object({
    name: z
      .string()
      .min(1)
      .max(256)
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
      .describe(
        "Variable name, not starting with CHAMVI_: the toolbox reads those. NODE_*, LD_*, OPENSSL_* and GCONV_PATH reach the run's commands (setup, verify, the model's bash) but not the toolbox itself.",
      ),
    value: z
      .string()
      .max(32_768)
      // No NUL: no process environment can hold one (node's spawn throws, the container
      // runtime refuses the pod), so the run would fail only after it was accepted.
      .regex(/^[^\x00]*$/, { message: 'may not contain a NUL byte (\\u0000): no process environment can hold one' })
      .default('')
      .describe(
        'Plain value, passed literally: $(NAME) is not expanded. No NUL byte. References to Secrets are not supported on purpose: the sandbox holds no secrets.',
      ),
  })
  .superRefine((variable, ctx) => {
    if (!envNameRule.holds(variable)) ctx.addIssue({ code: 'custom', message: envNameRule.message, path: ['name'] });
  })
  .meta({ 'x-kubernetes-validations': celValidations([envNameRule]) })
  .describe('An environment variable with a plain value.');

export const egressSpec = z
  .object({
    allow: z
      .array(
        z
          .string()
          .min(1)
          .max(EGRESS_PATTERN_MAX)
          .regex(EGRESS_PATTERN, { message: EGRESS_PATTERN_MESSAGE })
          .describe('A host pattern: registry.npmjs.org, *.pythonhosted.org (every name under it), proxy.golang.org:443, or *.'),
      )
      .max(EGRESS_ALLOW_MAX)
      .default([])
      .meta({ 'x-kubernetes-list-type': 'set' })
      .describe(
        'Hosts the sandbox may reach through the egress proxy, by name (never by address). Without a port a pattern opens ports 80 and 443. ' +
          "Each must lie within the operator's allowEgress, or the run fails InvalidSpec. Private, loopback, link-local and metadata " +
          'addresses and the API server stay closed even for *. Default: none, and the sandbox reaches nothing.',
      ),
  })
  .describe('Network access of the sandbox: through the egress proxy, to the listed host names only, every connection audited.');

export const sandboxSpec = z
  .object({
    image: z
      .string()
      .min(1)
      .max(1024)
      .optional()
      .describe(
        "Container image for the sandbox. Default: the operator's sandbox image. A custom image gets node and the toolbox copied in by an init container.",
      ),
    resources: resourceRequirements.optional(),
    runtimeClassName: objectName('RuntimeClass').optional().describe('RuntimeClass for stronger isolation, such as gvisor or kata.'),
    setup: z
      .string()
      .min(1)
      .max(10_000)
      .optional()
      .describe(
        'Shell command run once in the workspace before the first step, such as "npm ci". Its output is bounded and reported. ' +
          'It runs again, on a fresh import of the clone, only if the operator stops or loses Redis while it runs or just after it: ' +
          'keep it safe to repeat.',
      ),
    env: z
      .array(envVar)
      .max(64)
      .optional()
      .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['name'] })
      .describe('Environment variables of the sandbox. Plain values only.'),
    egress: egressSpec.prefault({}),
  })
  .describe('The sandbox pod the tools run in.');

type SpecInput = Record<string, unknown>;

// Transition rules: a run is one job. Changing what it works on would make its status lie,
// so the API server refuses such an update; a different job is a new run. `approval` and
// `publish` too: an approver answers what the run showed under the gates it was created with,
// so neither the gates nor where an approved change is pushed (branch, base, token) may move
// after the answer, nor be loosened by an author whose runs another person must approve.
// Each field may be absent (a run that names a template leaves it to the template, and the CRD
// fills in no defaults: see crd.ts), so presence is compared as well as the value.
export const specRules: readonly CrossFieldRule<SpecInput>[] = (
  ['task', 'repository', 'model', 'tools', 'sandbox', 'approval', 'publish'] as const
).map((field) => ({
  rule: `has(self.${field}) == has(oldSelf.${field}) && (!has(self.${field}) || self.${field} == oldSelf.${field})`,
  message: `spec.${field} cannot change after the run is created; create a new CodingRun for a different job`,
  fieldPath: `.${field}`,
  reason: 'FieldValueForbidden' as const,
  holds: () => true, // Transition rules compare with the old object; the operator never sees one.
}));

/** What a run may leave to the template it names (spec.templateRef); a run without one must set them. */
export const TEMPLATE_FILLED_FIELDS = ['task', 'repository', 'model'] as const;

// The CRD's `required` cannot depend on another field, so these three are optional in the
// schema and required here unless the run names a template (crd.ts drops them from `required`).
export const templateRefRules: readonly CrossFieldRule<SpecInput>[] = [
  ...TEMPLATE_FILLED_FIELDS.map((field) => ({
    rule: `has(self.templateRef) || has(self.${field})`,
    message: `spec.${field} is required unless spec.templateRef names a CodingRunTemplate that sets it`,
    fieldPath: `.${field}`,
    reason: 'FieldValueRequired' as const,
    holds: (spec: SpecInput) => spec.templateRef !== undefined || spec[field] !== undefined,
  })),
  {
    // The template the run was accepted with is recorded in status.template; naming another
    // afterwards would make the status describe a different job.
    rule: "(has(self.templateRef) ? self.templateRef.name : '') == (has(oldSelf.templateRef) ? oldSelf.templateRef.name : '')",
    message: 'spec.templateRef cannot change after the run is created; create a new CodingRun to use another template',
    fieldPath: '.templateRef',
    reason: 'FieldValueForbidden',
    holds: () => true,
  },
];

export const templateRefSpec = z
  .object({
    name: objectName('CodingRunTemplate').describe("Name of a CodingRunTemplate in this run's namespace (never another namespace)."),
  })
  .describe(
    "Start from a CodingRunTemplate in this run's namespace: the run's own fields are laid over the template's (objects merge " +
      'field by field, any other value, lists included, replaces the template\u2019s; docs/schedules.md), and the result is ' +
      'validated like a plain run (allowRepo and every other check). task, repository and model may then be left out. The ' +
      'operator copies the template into status.template when it accepts the run: a later edit of the template reaches only ' +
      'runs created after it. A missing template fails the run with TemplateNotFound.',
  );

const continueFromRule: CrossFieldRule<SpecInput> = {
  rule: "(has(self.continueFrom) ? self.continueFrom.name : '') == (has(oldSelf.continueFrom) ? oldSelf.continueFrom.name : '')",
  message: 'spec.continueFrom cannot change after the run is created; create a new CodingRun to continue another run',
  fieldPath: '.continueFrom',
  reason: 'FieldValueForbidden',
  holds: () => true,
};

export const continueFromSpec = z
  .object({
    name: objectName('CodingRun').describe("Name of a finished CodingRun in this run's namespace (never another namespace)."),
  })
  .describe(
    'Start from where a finished run left off instead of from the bare repository: the worker clones the commit that run cloned ' +
      "(its status.result.revision), applies that run's full diff (its diff ConfigMap), and the first prompt tells the agent that " +
      "run's task and final message. spec.repository.url must be the source run's; spec.repository.revision is not used. The run " +
      'fails InvalidSpec, saying what to change, when the source run is missing, has not finished (refused when the run is ' +
      'accepted, before it takes a sandbox slot: wait for the source, then create this run again), recorded no commit, kept no ' +
      "full diff (none, or cut at 1 MiB), or its diff does not apply. This run's own diff then holds both runs' changes. The " +
      'source is the run of that name when this run is accepted (status.continuedFrom records its uid): one deleted and created ' +
      'again under the name before this run starts fails it ContinueFromReplaced.',
  );

// The grader is part of the job: changing it mid-run would grade a different job.
const verifyRule: CrossFieldRule<SpecInput> = {
  rule: 'has(self.verify) == has(oldSelf.verify) && (!has(self.verify) || self.verify == oldSelf.verify)',
  message: 'spec.verify cannot change after the run is created; create a new CodingRun to check the work differently',
  fieldPath: '.verify',
  reason: 'FieldValueForbidden',
  holds: () => true,
};

// Presence too: for a run that names a template, absent means the template's instructions and
// "" means none, and the workers merge the prompt anew at every step.
const instructionsRule: CrossFieldRule<SpecInput> = {
  rule: 'has(self.instructions) == has(oldSelf.instructions) && (!has(self.instructions) || self.instructions == oldSelf.instructions)',
  message: 'spec.instructions cannot change after the run is created; create a new CodingRun for a different job',
  fieldPath: '.instructions',
  reason: 'FieldValueForbidden',
  holds: () => true,
};

/**
 * The run spec's fields without its cross-field rules: what a CodingRunTemplate makes partial
 * (zod cannot make a refined object partial). A run's spec is always codingRunSpec below.
 */
export const codingRunSpecFields = z.object({
  task: z.string().min(1).max(100_000).describe('What the agent must do, in plain words. 1 to 100000 characters.'),
  repository: repositorySpec,
  model: modelSpec,
  instructions: z.string().max(100_000).optional().describe('Extra system prompt for the agent, such as "Prefer small commits."'),
  repositoryInstructions: z
    .boolean()
    .default(true)
    .describe(
      "Put the repository's root guidance for agents (AGENTS.md, then CLAUDE.md, with their @includes; whole files of at most 32 KiB, " +
        '64 KiB in all) in the first prompt, so an agent that starts with bash still follows it. false leaves it out; reads of files ' +
        'still carry the guidance that applies to them. Default true.',
    ),
  continueFrom: continueFromSpec.optional(),
  tools: toolsSpec.prefault({}),
  approval: approvalSpec.prefault({}),
  budget: budgetSpec.prefault({}),
  sandbox: sandboxSpec.prefault({}),
  publish: publishSpec.optional(),
  verify: verifySpec.optional(),
  ttlSecondsAfterFinished: z
    .number()
    .int()
    .min(0)
    .max(31_536_000)
    .optional()
    .describe('Delete the run this many seconds after it finishes. Default: keep it.'),
});

export const codingRunSpec = codingRunSpecFields
  .extend({ templateRef: templateRefSpec.optional() })
  .superRefine((spec, ctx) => {
    if (!publishCredentialsRule.holds(spec)) ctx.addIssue({ code: 'custom', message: publishCredentialsRule.message, path: ['publish'] });
  })
  .meta({
    'x-kubernetes-validations': celValidations([
      ...specRules,
      ...templateRefRules,
      instructionsRule,
      continueFromRule,
      publishCredentialsRule,
      verifyRule,
    ]),
  })
  .describe('What the agent should do, where, with which model, tools and limits.');

export type CodingRunSpec = z.output<typeof codingRunSpec>;
export type CodingRunSpecInput = z.input<typeof codingRunSpec>;
