// A git ref name, as the spec takes one: spec.repository.revision (which the worker hands to
// `git fetch origin -- <revision>`) and spec.publish's branch and pull request base (which it
// pushes to). The rules are `git check-ref-format --allow-onelevel`'s (refs.c), narrowed to
// printable ASCII, plus no leading "-" or "+".
//
// Why it matters: git fetch reads its argument as a refspec, so a revision `a:refs/replace/<id>`
// or `refs/heads/*:refs/replace/*` wrote refs into the clone, whose .git the clone cache then
// handed to other namespaces' runs of the same commit; a leading "+" forces such an update and a
// leading "-" is an option. A ref name here has no ":" or "*" and starts with neither.
//
// The pattern and the rules are written once and read twice: the CRD gets the pattern and the
// rules' CEL (`kubectl apply` refuses the name), the operator the same pattern and the rules'
// predicates (cross-field-rules.ts). The character class uses only ASCII ranges and escapes that
// JavaScript's and RE2's (the API server's) regular expressions read alike.
import { z } from 'zod';
import { celValidations, type CrossFieldRule } from './cross-field-rules.ts';

/**
 * Printable ASCII without space and the characters git refuses in a ref name (~ ^ : ? * [ \):
 * the ranges `!-)`, `+-9`, `;->`, `@-Z`, `]` and `_-}`. DEL, control characters and anything
 * beyond ASCII (Unicode spaces and look-alikes of "main" among them) are outside it.
 */
export const REF_NAME_CHARACTERS = '!-)+-9;->@-Z\\]_-}';

/** A string of ref-name characters only (the structure is REF_NAME_RULES'). */
export const REF_NAME_PATTERN = `^[${REF_NAME_CHARACTERS}]+$`;

export const REF_NAME_CHARACTERS_MESSAGE =
  'must be a git ref name: printable ASCII without spaces or any of ~ ^ : ? * [ \\ (a branch, a tag or a commit id)';

/** Longest ref name the spec takes (git's own limit is the file system's). */
export const REF_NAME_MAX = 255;

/** The structure git check-ref-format asks for, one rule per thing to fix. */
export const REF_NAME_RULES: readonly CrossFieldRule<string>[] = [
  {
    rule: "!self.startsWith('-') && !self.startsWith('+')",
    message: 'must be a git ref name: it may not start with "-" (an option to git) or "+" (a forced refspec)',
    holds: (name) => !name.startsWith('-') && !name.startsWith('+'),
  },
  {
    rule: "!self.contains('..') && !self.contains('//') && !self.contains('@{') && self != '@'",
    message: 'must be a git ref name: no "..", "//" or "@{", and not "@" alone',
    holds: (name) => !name.includes('..') && !name.includes('//') && !name.includes('@{') && name !== '@',
  },
  {
    rule: "!self.startsWith('/') && !self.endsWith('/') && !self.endsWith('.')",
    message: 'must be a git ref name: it may not start with "/" or end with "/" or "."',
    holds: (name) => !name.startsWith('/') && !name.endsWith('/') && !name.endsWith('.'),
  },
  // Per "/"-separated part: git refuses `team.lock/x` as it refuses `x.lock` (a lock file's name).
  {
    rule: "!self.startsWith('.') && !self.contains('/.') && !self.endsWith('.lock') && !self.contains('.lock/')",
    message: 'must be a git ref name: no part between slashes may start with "." or end with ".lock"',
    holds: (name) => !name.startsWith('.') && !name.includes('/.') && !name.endsWith('.lock') && !name.includes('.lock/'),
  },
];

/** The first rule a name breaks, as its message; undefined for a ref name git and the spec accept. */
export function refNameProblem(name: string): string | undefined {
  if (name.length === 0 || name.length > REF_NAME_MAX) return `must be a git ref name of 1 to ${REF_NAME_MAX} characters`;
  if (!new RegExp(REF_NAME_PATTERN).test(name)) return REF_NAME_CHARACTERS_MESSAGE;
  return REF_NAME_RULES.find((rule) => !rule.holds(name))?.message;
}

/** Whether `name` is a ref name git and the spec accept (a full or short commit id is one too). */
export const isRefName = (name: string): boolean => refNameProblem(name) === undefined;

/**
 * A string field of `pattern` and `rules`: the rules refine the zod schema and are the CRD's
 * CEL, so the operator and `kubectl apply` refuse the same values.
 */
export function ruledString(pattern: string, message: string, rules: readonly CrossFieldRule<string>[], max = REF_NAME_MAX) {
  return z
    .string()
    .min(1)
    .max(max)
    .regex(new RegExp(pattern), { message })
    .superRefine((value, ctx) => {
      for (const rule of rules) if (!rule.holds(value)) ctx.addIssue({ code: 'custom', message: rule.message });
    })
    .meta({ 'x-kubernetes-validations': celValidations(rules) });
}
