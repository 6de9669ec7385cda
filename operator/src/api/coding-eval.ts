// The CodingEval API: a matrix of tasks × models × attempts that the operator runs as ordinary
// CodingRuns (owned by the eval, so fair share, budgets and RBAC apply to them as to any run),
// grades with deterministic graders (evals/graders.ts) and sums up per task × model in status.
// Like coding-run-spec.ts, the zod schema is the source of the CRD (`make crds`) and of the
// operator's own check; cross-field rules are written once as CEL and once as a predicate.
import { z } from 'zod';
import type { ObjectMeta } from './object-meta.ts';
import { celValidations, type CrossFieldRule } from './cross-field-rules.ts';
import { budgetSpec, modelSpec, repositorySpec, sandboxSpec, toolsSpec } from './coding-run-spec.ts';
import { condition } from './kubernetes-names.ts';
import { TOOL_NAMES } from './tool-names.ts';
import { verifySpec } from './verify-spec.ts';
import { NOT_WHITESPACE, WHITESPACE_CHARACTERS } from './portable-pattern.ts';

export const EVAL_KIND = 'CodingEval';
export const EVAL_PLURAL = 'codingevals';
export const EVAL_SINGULAR = 'codingeval';
export const EVAL_SHORT_NAMES = ['ceval'] as const;

/** Most tasks, models and attempts: the matrix (and its status) stays small enough for one object. */
export const EVAL_LIMITS = { tasks: 20, models: 8, attempts: 20, runs: 400, graders: 16 } as const;

export const GRADER_TYPES = [
  'verify',
  'file-contains',
  'file-excludes',
  'file-unchanged',
  'used-tool',
  'not-used-tool',
  'tool-never-failed',
  'max-tool-calls',
  'answer-contains',
  'answer-excludes',
  'max-turns',
] as const;
export type GraderType = (typeof GRADER_TYPES)[number];

/** Which grader needs which field: one table for the CEL rules, the predicates and the docs. */
export const GRADER_FIELDS: Record<GraderType, ReadonlyArray<'path' | 'text' | 'tool' | 'max'>> = {
  verify: [],
  'file-contains': ['path', 'text'],
  'file-excludes': ['path', 'text'],
  'file-unchanged': ['path'],
  'used-tool': ['tool'],
  'not-used-tool': ['tool'],
  'tool-never-failed': ['tool'],
  'max-tool-calls': ['max'],
  'answer-contains': ['text'],
  'answer-excludes': ['text'],
  'max-turns': ['max'],
};

// A DNS label, so task and model names can be label values and parts of run names.
const matrixKey = (what: string) =>
  z
    .string()
    .min(1)
    .max(24)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { message: 'must be a lowercase DNS label of at most 24 characters' })
    .describe(`Name of the ${what} in the matrix: a lowercase DNS label of at most 24 characters, used in run names and labels.`);

type GraderInput = { type: string; path?: string; text?: string; tool?: string; max?: number };

export const graderRules: readonly CrossFieldRule<GraderInput>[] = (['path', 'text', 'tool', 'max'] as const).flatMap((field) => {
  const needing = GRADER_TYPES.filter((type) => GRADER_FIELDS[type].includes(field));
  const list = needing.map((type) => `'${type}'`).join(', ');
  // max-tool-calls may name a tool (count only its calls); every other grader without `tool` in its table must not.
  const mayHave = field === 'tool' ? [...needing, 'max-tool-calls'] : needing;
  const mayList = mayHave.map((type) => `'${type}'`).join(', ');
  return [
    {
      rule: `!(self.type in [${list}]) || has(self.${field})`,
      message: `${field} is required for graders of type ${needing.join(', ')}`,
      fieldPath: `.${field}`,
      reason: 'FieldValueRequired' as const,
      holds: (grader: GraderInput) => !needing.includes(grader.type as GraderType) || grader[field] !== undefined,
    },
    {
      rule: `!has(self.${field}) || self.type in [${mayList}]`,
      message: `${field} may only be set for graders of type ${mayHave.join(', ')}`,
      fieldPath: `.${field}`,
      reason: 'FieldValueForbidden' as const,
      holds: (grader: GraderInput) => grader[field] === undefined || (mayHave as readonly string[]).includes(grader.type),
    },
  ];
});

/**
 * A grader's path as git prints one in a diff: no `./`, `//`, `.` or `..` segment, no trailing
 * `/`. The file graders compare it with the diff's paths as strings (a directory as a prefix),
 * so `test/`, `./test` or `a/../b` named nothing the diff could hold and never failed.
 */
export const graderPathRules: readonly CrossFieldRule<string>[] = [
  {
    rule:
      "!(self == '.' || self == '..' || self.startsWith('/') || self.startsWith('./') || self.startsWith('../') || " +
      "self.endsWith('/') || self.endsWith('/.') || self.endsWith('/..') || self.contains('//') || self.contains('/./') || " +
      "self.contains('/../'))",
    message:
      'a grader path must be written as git prints paths: relative to the repository root, without ./, //, . or .. segments ' +
      'or a trailing / (such as test or src/greet.ts, not test/ or ./src/greet.ts)',
    reason: 'FieldValueInvalid',
    holds: (path) => path.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..'),
  },
];

export const graderSpec = z
  .object({
    type: z
      .enum(GRADER_TYPES)
      .describe(
        "What to check. verify: the run's own spec.verify command passed (status.result.verification.passed). " +
          'file-contains / file-excludes: some / no file at or under path, as the run left it and as far as its diff shows it, ' +
          'has the text; a file whose change git shows as binary, or that the change makes a symbolic link, fails both. ' +
          'file-unchanged: the diff touches nothing at or under path (a rename, by its old or new name). used-tool / not-used-tool: the transcript has / has no call of tool. ' +
          'tool-never-failed: no call of tool returned a tool error. max-tool-calls: at most max calls (of tool, when set). ' +
          "answer-contains / answer-excludes: the run's final answer (status.result.summary) has / has not the text. " +
          'max-turns: at most max steps (model calls).',
      ),
    name: z
      .string()
      .min(1)
      .max(63)
      .optional()
      .describe('A name for the grader in reports and failure reasons. Default: its type and argument.'),
    path: z
      .string()
      .min(1)
      .max(1024)
      .regex(new RegExp(`^[^/${WHITESPACE_CHARACTERS}]${NOT_WHITESPACE}*$`), {
        message: 'must be a path relative to the repository root, without spaces',
      })
      .superRefine((path, ctx) => {
        for (const rule of graderPathRules) if (!rule.holds(path)) ctx.addIssue({ code: 'custom', message: rule.message });
      })
      .meta({ 'x-kubernetes-validations': celValidations(graderPathRules) })
      .optional()
      .describe(
        'file graders: a file or a directory (every file under it), relative to the repository root and written as git ' +
          'prints paths, such as src/greet.ts or test.',
      ),
    text: z
      .string()
      .min(1)
      .max(4096)
      .optional()
      .describe('file-contains, file-excludes, answer-*: the literal text to look for (no regular expression).'),
    tool: z.enum(TOOL_NAMES).optional().describe('Tool graders: the tool name. It must be one the task allows (tasks[].tools.allow).'),
    max: z.number().int().min(0).max(100_000).optional().describe('max-tool-calls and max-turns: the most allowed.'),
  })
  .meta({ 'x-kubernetes-validations': celValidations(graderRules) })
  .describe('A deterministic check of one finished run. No model judges: file contents, tool calls, answer text, turn counts, verify.');

export type GraderSpec = z.output<typeof graderSpec>;

type TaskInput = { tools?: { allow?: readonly string[] }; graders?: readonly GraderInput[] };

/** A grader naming a tool the task does not allow cannot fail (not-used-tool) or cannot pass (used-tool): refused at apply. */
export const taskRules: readonly CrossFieldRule<TaskInput>[] = [
  {
    rule: '!has(self.tools) || !has(self.tools.allow) || self.graders.all(g, !has(g.tool) || g.tool in self.tools.allow)',
    message:
      'a grader names a tool this task does not allow (tools.allow): such a grader measures nothing; allow the tool or remove the grader',
    fieldPath: '.graders',
    reason: 'FieldValueInvalid',
    holds: (task) => {
      const allow = task.tools?.allow;
      return allow === undefined || (task.graders ?? []).every((grader) => grader.tool === undefined || allow.includes(grader.tool));
    },
  },
];

export const evalTaskSpec = z
  .object({
    name: matrixKey('task'),
    task: z.string().min(1).max(100_000).describe("What the agent must do: the runs' spec.task."),
    repository: repositorySpec,
    tools: toolsSpec.optional().describe("Which tools the runs may use (the runs' spec.tools). Graders may name only these. Default: all."),
    sandbox: sandboxSpec.optional().describe("The runs' sandbox (spec.sandbox), such as a setup command."),
    verify: verifySpec
      .optional()
      .describe(
        "The runs' spec.verify: the command the operator runs after the model finishes, and the paths it protects. " +
          'Graded by the verify grader (status.result.verification.passed); with required (the default) a failing run ends VerificationFailed.',
      ),
    graders: z
      .array(graderSpec)
      .min(1)
      .max(EVAL_LIMITS.graders)
      .describe('How each finished run of this task is graded: it passes when every grader passes.'),
  })
  .meta({ 'x-kubernetes-validations': celValidations(taskRules) })
  .describe('One task of the eval: a repository at a revision, what to do, and how to grade it.');

export const evalModelSpec = z
  .object({
    name: matrixKey('model'),
    model: modelSpec,
    instructions: z
      .string()
      .max(100_000)
      .optional()
      .describe("Extra system prompt for this model's runs (spec.instructions), to compare prompts."),
  })
  .describe('One model (or model and prompt) of the eval.');

// An eval is one experiment: changing its matrix would make the numbers in status lie.
const immutableRule: CrossFieldRule<Record<string, unknown>> = {
  rule: 'self == oldSelf',
  message: 'spec of a CodingEval cannot change after it is created; create a new CodingEval for a different experiment',
  reason: 'FieldValueForbidden',
  holds: () => true,
};

const distinctNames = (what: string) => ({
  rule: 'self.all(x, self.exists_one(y, y.name == x.name))',
  message: `${what} names must be distinct`,
});

export const codingEvalSpec = z
  .object({
    tasks: z
      .array(evalTaskSpec)
      .min(1)
      .max(EVAL_LIMITS.tasks)
      .meta({ 'x-kubernetes-validations': [distinctNames('task')] })
      .describe('The tasks, each run by every model.'),
    models: z
      .array(evalModelSpec)
      .min(1)
      .max(EVAL_LIMITS.models)
      .meta({ 'x-kubernetes-validations': [distinctNames('model')] })
      .describe('The models compared.'),
    attempts: z
      .number()
      .int()
      .min(1)
      .max(EVAL_LIMITS.attempts)
      .default(5)
      .describe('Runs per task and model. A model is not deterministic: the unit is a pass rate over attempts. Default 5.'),
    passAtK: z
      .array(z.number().int().min(1).max(EVAL_LIMITS.attempts).describe('A k.'))
      .max(4)
      .default([1])
      .meta({ 'x-kubernetes-list-type': 'set' })
      .describe('The k of each pass@k in status (the unbiased estimator over the attempts made; k at most attempts). Default [1].'),
    parallelism: z
      .number()
      .int()
      .min(1)
      .max(100)
      .default(4)
      .describe("Most of the eval's runs active at once. The operator's maxActiveRuns and fair share apply on top. Default 4."),
    budget: budgetSpec.optional().describe("Every run's spec.budget."),
  })
  .meta({
    'x-kubernetes-validations': [
      ...celValidations([immutableRule]),
      {
        rule: `size(self.tasks) * size(self.models) * (has(self.attempts) ? self.attempts : 5) <= ${EVAL_LIMITS.runs}`,
        message: `tasks × models × attempts must be at most ${EVAL_LIMITS.runs} runs; split the eval`,
      },
      {
        rule: 'has(self.passAtK) ? self.passAtK.all(k, k <= (has(self.attempts) ? self.attempts : 5)) : true',
        message: 'every passAtK k must be at most attempts',
        fieldPath: '.passAtK',
      },
    ],
  })
  .describe('The experiment: every task × every model × attempts runs, each graded.');

export type CodingEvalSpec = z.output<typeof codingEvalSpec>;
export type CodingEvalSpecInput = z.input<typeof codingEvalSpec>;
export type EvalTask = z.output<typeof evalTaskSpec>;
export type EvalModel = z.output<typeof evalModelSpec>;

export const EVAL_PHASES = ['Running', 'Complete', 'Failed'] as const;
export type EvalPhase = (typeof EVAL_PHASES)[number];

const count = (description: string) => z.number().int().min(0).describe(description);
const rate = (description: string) => z.number().min(0).max(1).describe(description);

export const distributionStatus = z
  .object({
    mean: z.number().min(0).describe('Mean.'),
    p50: z.number().min(0).describe('Median (nearest rank).'),
    p90: z.number().min(0).describe('90th percentile (nearest rank).'),
  })
  .describe('A distribution over the attempts whose run ran (0 when none did).');

export const attemptStatus = z
  .object({
    run: z.string().max(253).describe('The CodingRun of the attempt.'),
    task: z.string().max(24).describe('Task name.'),
    model: z.string().max(24).describe('Model name.'),
    attempt: z.number().int().min(1).describe('Attempt number, from 1.'),
    phase: z.string().max(32).describe("The run's terminal phase."),
    reason: z.string().max(128).optional().describe("The run's status.reason."),
    passed: z.boolean().describe('Whether the run Succeeded and every grader passed.'),
    failure: z
      .string()
      .max(160)
      .optional()
      .describe("Why it failed: the run's reason (BudgetExceeded, VerificationFailed, ...), else grader:NAME of its first failed grader."),
    failedGraders: z
      .array(z.string().max(160).describe('A grader and why it failed.'))
      .max(EVAL_LIMITS.graders)
      .optional()
      .describe('The graders that failed, with why.'),
    totalTokens: count("The run's usage.totalTokens."),
    durationSeconds: z.number().min(0).describe('From the run starting to its end.'),
  })
  .describe('One graded attempt.');

export const resultStatus = z
  .object({
    task: z.string().max(24).describe('Task name.'),
    model: z.string().max(24).describe('Model name.'),
    attempts: count('Attempts graded so far.'),
    passes: count('Attempts that passed.'),
    passRate: rate('passes / attempts.'),
    passAtK: z
      .array(
        z
          .object({ k: z.number().int().min(1).describe('k.'), value: rate('The unbiased estimate of pass@k: 1 - C(n-c,k)/C(n,k).') })
          .describe('One pass@k.'),
      )
      .max(4)
      .describe('pass@k for each spec.passAtK k not above attempts.'),
    ran: count(
      'Attempts whose run ran: all but those failed RunRefused or ForeignRun, which never ran and spent nothing. ' +
        'tokens and durationSeconds are over these.',
    ).optional(),
    tokens: distributionStatus.describe('Total tokens per attempt that ran.'),
    durationSeconds: distributionStatus.describe('Seconds per attempt that ran.'),
    failures: z
      .array(
        z
          .object({
            reason: z.string().max(160).describe('The run reason (BudgetExceeded, VerificationFailed, ...) or grader:NAME.'),
            count: count('Attempts.'),
          })
          .describe('Failures of one reason.'),
      )
      .max(32)
      .describe('Failed attempts by reason.'),
  })
  .describe('The figures of one task × model.');

export const codingEvalStatus = z
  .object({
    phase: z
      .enum(EVAL_PHASES)
      .optional()
      .describe(
        'Running while attempts are left, Complete when every attempt is graded, Failed when the eval is invalid ' +
          '(InvalidSpec) or its status outgrew what the API server stores (StatusTooLarge).',
      ),
    reason: z.string().max(128).optional().describe('Machine-readable cause of Failed: InvalidSpec or StatusTooLarge.'),
    message: z.string().max(4096).optional().describe('One human sentence: where the eval is or what to change.'),
    observedGeneration: z.number().int().min(0).optional().describe('The .metadata.generation this status was computed from.'),
    conditions: z
      .array(condition)
      .max(8)
      .optional()
      .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] })
      .describe(
        'Complete: True when every attempt is graded (reason Complete), the eval is invalid (InvalidSpec) or it stopped ' +
          'because its status outgrew what the API server stores (StatusTooLarge); False while ' +
          'attempts are left (Running, or RunsForbidden while the API server forbids creating runs, such as a ' +
          'ResourceQuota on codingruns: the eval tries again every minute).',
      ),
    planned: count('tasks × models × attempts.').optional(),
    created: count('Runs created so far.').optional(),
    graded: count('Attempts graded so far.').optional(),
    passes: count('Attempts passed so far, over all tasks and models.').optional(),
    startTime: z.string().meta({ format: 'date-time' }).optional().describe('When the first run was created.'),
    completionTime: z.string().meta({ format: 'date-time' }).optional().describe('When the last attempt was graded.'),
    results: z
      .array(resultStatus)
      .max(EVAL_LIMITS.tasks * EVAL_LIMITS.models)
      .optional()
      .describe('Per task × model. kubectl codingrun eval report NAME prints them.'),
    attempts: z.array(attemptStatus).max(EVAL_LIMITS.runs).optional().describe('Every graded attempt, in task, model, attempt order.'),
  })
  .describe('What the operator ran and measured. Written by the operator only.');

export type CodingEvalStatus = z.output<typeof codingEvalStatus>;
export type AttemptStatus = z.output<typeof attemptStatus>;
export type EvalResult = z.output<typeof resultStatus>;
export type Distribution = z.output<typeof distributionStatus>;

export interface CodingEval {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: CodingEvalSpecInput;
  status?: CodingEvalStatus;
}
