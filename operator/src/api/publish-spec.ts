// spec.publish: the run's result as a branch and a pull request on the repository's forge
// (issue #14). The worker does it after a Succeeded run (workers/publish-job.ts); which forge
// API a host speaks comes from the operator config (config/operator-config.ts, publish.forges).
import { z } from 'zod';
import type { CrossFieldRule } from './cross-field-rules.ts';
import { keyReference } from './kubernetes-names.ts';

/** Characters a branch template may use ({run} and {namespace} are replaced). */
export const BRANCH_TEMPLATE_PATTERN = '^[A-Za-z0-9_{}][A-Za-z0-9._/{}+=-]*$';

/**
 * What git check-ref-format refuses beyond the characters: written once as CEL for the API
 * server and once as a predicate for the operator, which checks the rendered name again.
 */
export const branchNameRules: readonly CrossFieldRule<string>[] = [
  {
    rule: "!self.contains('..') && !self.contains('//') && !self.contains('/.') && !self.contains('@{')",
    message: 'must be a git branch name: no "..", "//", "/." or "@{"',
    holds: (name) => !name.includes('..') && !name.includes('//') && !name.includes('/.') && !name.includes('@{'),
  },
  {
    rule: "!self.endsWith('/') && !self.endsWith('.') && !self.endsWith('.lock')",
    message: 'must be a git branch name: it may not end with "/", "." or ".lock"',
    holds: (name) => !name.endsWith('/') && !name.endsWith('.') && !name.endsWith('.lock'),
  },
  // git makes both (refs/heads/HEAD, refs/heads/refs/heads/main), and neither is what was meant.
  {
    rule: "self != 'HEAD' && !self.startsWith('refs/')",
    message: 'must be a branch name alone: not "HEAD" and not a full ref ("refs/heads/main" is written "main")',
    holds: (name) => name !== 'HEAD' && !name.startsWith('refs/'),
  },
];

/** A rendered branch name git accepts (the template's rules, and no braces left over). */
export function isBranchName(name: string): boolean {
  return /^[A-Za-z0-9_][A-Za-z0-9._/+=-]*$/.test(name) && name.length <= 255 && branchNameRules.every((rule) => rule.holds(name));
}

export const pullRequestSpec = z
  .object({
    title: z
      .string()
      .min(1)
      .max(256)
      // One line: it is the commit's subject, and lines of its own would be the message's trailers.
      .regex(/^[^\r\n]*$/, 'the title is one line: put the rest in pullRequest.body')
      .optional()
      .describe("Title of the pull request, also the commit's subject. Default: the first line of spec.task, cut to 72 characters."),
    body: z
      .string()
      .max(65_536)
      .optional()
      .describe(
        "Body of the pull request. Default: the agent's final message (status.result.summary), the diff's size and the token usage.",
      ),
    draft: z
      .boolean()
      .default(false)
      .describe(
        'Open it as a draft (GitHub: a draft pull request; GitLab: a "Draft:" title; Gitea/Forgejo: a "WIP:" title). Default false.',
      ),
    labels: z
      .array(
        z
          .string()
          .min(1)
          .max(128)
          // GitLab takes labels as one comma-separated list: "a,b" would be two labels there.
          .regex(/^[^,]+$/, { message: 'a label name has no comma (GitLab reads one as two labels)' })
          .describe('A label name, without a comma.'),
      )
      .max(20)
      .default([])
      .meta({ 'x-kubernetes-list-type': 'set' })
      .describe('Labels to put on it, by name. On Gitea/Forgejo each must already exist in the repository. Default: none.'),
    base: z
      .string()
      .min(1)
      .max(255)
      .regex(new RegExp(BRANCH_TEMPLATE_PATTERN), { message: 'must be a branch name' })
      .superRefine((base, ctx) => {
        for (const rule of branchNameRules) if (!rule.holds(base)) ctx.addIssue({ code: 'custom', message: rule.message });
      })
      .meta({ 'x-kubernetes-validations': branchNameRules.map(({ rule, message }) => ({ rule, message })) })
      .optional()
      .describe("Branch the pull request asks to merge into. Default: spec.repository.revision, else the repository's default branch."),
  })
  .describe('Open a pull request from the branch, or update the open one. Without it only the branch is pushed.');

export const publishSpec = z
  .object({
    branch: z
      .string()
      .min(1)
      .max(200)
      .regex(new RegExp(BRANCH_TEMPLATE_PATTERN), {
        message: 'must be a git branch name of letters, digits and . _ / + = -, with {run} and {namespace} allowed',
      })
      .superRefine((branch, ctx) => {
        for (const rule of branchNameRules) if (!rule.holds(branch)) ctx.addIssue({ code: 'custom', message: rule.message });
      })
      .meta({ 'x-kubernetes-validations': branchNameRules.map(({ rule, message }) => ({ rule, message })) })
      .default('chamvi/{run}')
      .describe(
        "Branch to push the run's change to, as a template: {run} becomes the run's name, {namespace} its namespace. Default " +
          'chamvi/{run}. An existing branch is moved only when its last commit was made by the operator for a run of this name; ' +
          'any other existing branch (main, a human branch) fails the run PublishFailed and is left alone.',
      ),
    credentialsSecretRef: keyReference(
      'Secret',
      'token',
      "Secret in the run's own namespace holding a token that may push branches and open pull requests. Default: " +
        'spec.repository.credentialsSecretRef. Read by the operator only: it never enters the sandbox and never shows in status, Events or logs.',
    ).optional(),
    pullRequest: pullRequestSpec.optional(),
  })
  .describe(
    "Publish the result of a run that Succeeded with a change: the worker applies the run's full diff to a fresh clone of the commit " +
      'the run started from, commits it (author from the operator config), pushes the branch over the checked repository URL and ' +
      'opens or updates a pull request. Done once: a retried job or a restarted operator finds the branch and the pull request and ' +
      'changes nothing. A failure ends the run Failed with reason PublishFailed and the forge message; the diff is kept. What was ' +
      'published is in status.result.published.',
  );

/** spec.publish needs a token: its own, or the repository's. */
export const publishCredentialsRule: CrossFieldRule<Record<string, unknown>> = {
  rule: '!has(self.publish) || has(self.publish.credentialsSecretRef) || has(self.repository.credentialsSecretRef)',
  message:
    'spec.publish needs a token that may push: set spec.publish.credentialsSecretRef (or spec.repository.credentialsSecretRef) to a Secret holding one',
  fieldPath: '.publish',
  reason: 'FieldValueRequired',
  holds: (spec) => {
    const publish = spec.publish as { credentialsSecretRef?: unknown } | undefined;
    const repository = spec.repository as { credentialsSecretRef?: unknown } | undefined;
    return publish === undefined || publish.credentialsSecretRef !== undefined || repository?.credentialsSecretRef !== undefined;
  },
};

export type PublishSpec = z.output<typeof publishSpec>;
