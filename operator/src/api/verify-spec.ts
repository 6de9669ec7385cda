// spec.verify: the run's own check of its work. After the model finishes, the operator (never
// the model) runs the command in the sandbox; its exit status decides whether the run
// succeeded. A separate file from coding-run-spec.ts so CodingEval tasks can reuse the schema.
import { z } from 'zod';
import { celValidations, type CrossFieldRule } from './cross-field-rules.ts';
import { DURATION_PATTERN, parseDuration } from './duration.ts';
import {
  PROTECT_GLOB_MAX,
  PROTECT_GLOB_PATTERN,
  PROTECT_GLOB_PATTERN_MESSAGE,
  PROTECT_MAX,
  protectGlobProblem,
  protectGlobRules,
} from './protect-glob.ts';

/** Most times a failing verification is handed back to the model. */
export const VERIFY_RETRIES_MAX = 10;
/** Longest verify command: the bash tool takes at most 100000 characters. */
export const VERIFY_COMMAND_MAX = 10_000;
/** Longest verify timeout: the longest command the bash tool runs (BASH_MAX_TIMEOUT_MS; a unit test keeps them equal). */
export const VERIFY_TIMEOUT_MAX_MS = 30 * 60_000;
const VERIFY_TIMEOUT_MAX = `${VERIFY_TIMEOUT_MAX_MS / 60_000}m`;

const protectGlob = z
  .string()
  .min(1)
  .max(PROTECT_GLOB_MAX)
  .regex(new RegExp(PROTECT_GLOB_PATTERN), { message: PROTECT_GLOB_PATTERN_MESSAGE })
  .superRefine((glob, ctx) => {
    for (const rule of protectGlobRules) if (!rule.holds(glob)) ctx.addIssue({ code: 'custom', message: rule.message });
    const problem = protectGlobProblem(glob);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  })
  .meta({ 'x-kubernetes-validations': celValidations(protectGlobRules) })
  .describe(
    'A path pattern relative to the repository root: * and ? within one path segment, ** across segments, [abc] and {a,b}. ' +
      'It protects the paths it matches and everything under them: test protects test/unit/a.test.js. ' +
      'A glob naming .git (.git/**) is refused: git keeps .git, the restore never touches it, and no wildcard glob covers it.',
  );

type VerifyInput = { timeout?: string };

/**
 * At least 1ms, as the other durations (coding-run-spec.ts `duration`): a zero timeout was
 * accepted and only clamped at use (verify-work.ts), to a check killed before it could pass.
 * 1ms, not "above 0s": the operator counts whole milliseconds and reads 0.0001s as 0.
 */
export const verifyRules: readonly CrossFieldRule<VerifyInput>[] = [
  {
    rule: `!has(self.timeout) || duration(self.timeout) >= duration('1ms')`,
    message: 'timeout must be at least 1ms',
    fieldPath: '.timeout',
    reason: 'FieldValueInvalid',
    holds: (verify) => verify.timeout === undefined || (parseDuration(verify.timeout) ?? 0) >= 1,
  },
  {
    rule: `!has(self.timeout) || duration(self.timeout) <= duration('${VERIFY_TIMEOUT_MAX}')`,
    message: `timeout may be at most ${VERIFY_TIMEOUT_MAX}, the longest command the sandbox runs`,
    fieldPath: '.timeout',
    reason: 'FieldValueInvalid',
    holds: (verify) => verify.timeout === undefined || (parseDuration(verify.timeout) ?? 0) <= VERIFY_TIMEOUT_MAX_MS,
  },
];

export const verifySpec = z
  .object({
    command: z
      .string()
      .min(1)
      .max(VERIFY_COMMAND_MAX)
      .describe(
        'Shell command (bash) run in the repository root after the model finishes, such as "npm test" or "make check". ' +
          'Exit status 0 passes. It runs in a clean shell: nothing the model exported or left running in its bash session applies.',
      ),
    timeout: z
      .string()
      .max(64)
      .regex(new RegExp(DURATION_PATTERN), { message: 'must be a duration such as 90s, 30m or 1h30m' })
      .default('10m')
      .describe(
        `How long the command may run; past it the process tree is killed and the verification fails. A duration such as 90s or 5m, from 1ms to ${VERIFY_TIMEOUT_MAX}. Default 10m. ` +
          'The run budget (spec.budget.timeout) still applies and ends the run when it passes first.',
      ),
    required: z
      .boolean()
      .default(true)
      .describe(
        'true: a run whose last verification fails ends Failed with reason VerificationFailed (its diff is kept). ' +
          'false: the result is recorded in status.result.verification and the run still succeeds. Default true.',
      ),
    retries: z
      .number()
      .int()
      .min(0)
      .max(VERIFY_RETRIES_MAX)
      .default(0)
      .describe(
        `How many times a failing verification is handed back to the model (its output as a new user message) to fix and finish again. 0 to ${VERIFY_RETRIES_MAX}, default 0. ` +
          'The retries spend the same budget (maxSteps, maxTokens, timeout) as the rest of the run.',
      ),
    protect: z
      .array(protectGlob)
      .max(PROTECT_MAX)
      .default([])
      .meta({ 'x-kubernetes-list-type': 'set' })
      .describe(
        "Paths the model may not change, such as the tests that grade it: the model's write_file, edit_file and multi_edit calls on " +
          'them fail as tool errors, and before the command runs every protected path is put back as it was in the cloned revision ' +
          '(files the model added under them are removed), so an edit through bash cannot change the grade. Default: none. At most 64.',
      ),
  })
  .superRefine((verify, ctx) => {
    for (const rule of verifyRules)
      if (!rule.holds(verify))
        ctx.addIssue({ code: 'custom', message: rule.message, path: rule.fieldPath ? [rule.fieldPath.slice(1)] : [] });
  })
  .meta({ 'x-kubernetes-validations': celValidations(verifyRules) })
  .describe(
    'A check the operator runs in the sandbox after the model finishes; its exit status decides whether the run succeeded. ' +
      'The model never runs it and cannot skip it. The result is in status.result.verification.',
  );

export type VerifySpec = z.output<typeof verifySpec>;
