// spec.publish: the run's result as a branch and a pull request on the repository's forge
// (issue #14). The worker does it after a Succeeded run (workers/publish-job.ts); which forge
// API a host speaks comes from the operator config (config/operator-config.ts, publish.forges).
import { z } from 'zod';
import type { CrossFieldRule } from './cross-field-rules.ts';
import { REF_NAME_MAX, REF_NAME_RULES, ruledString } from './git-ref-name.ts';
import { keyReference } from './kubernetes-names.ts';

/** Characters a branch template may use ({run} and {namespace} are replaced). */
export const BRANCH_TEMPLATE_PATTERN = '^[A-Za-z0-9_{}][A-Za-z0-9._/{}+=-]*$';

/** Longest branch template: room for {run} and {namespace} to grow within REF_NAME_MAX. */
const BRANCH_TEMPLATE_MAX = 200;

/**
 * A branch name: a git ref name (git-ref-name.ts, shared with spec.repository.revision) that is a
 * branch's short name. Checked on the template by the API server and the operator, and on the
 * rendered name when the run is accepted and again when it publishes.
 */
export const branchNameRules: readonly CrossFieldRule<string>[] = [
  ...REF_NAME_RULES,
  // git makes both (refs/heads/HEAD, refs/heads/refs/heads/main), and neither is what was meant.
  {
    rule: "self != 'HEAD' && !self.startsWith('refs/')",
    message: 'must be a branch name alone: not "HEAD" and not a full ref ("refs/heads/main" is written "main")',
    holds: (name) => name !== 'HEAD' && !name.startsWith('refs/'),
  },
];

/** Why a rendered branch name is not one git accepts (the template's rules, and no braces left over); undefined when it is. */
export function branchNameProblem(name: string): string | undefined {
  if (name.length > REF_NAME_MAX) return `must be a git branch name of at most ${REF_NAME_MAX} characters`;
  if (!/^[A-Za-z0-9_][A-Za-z0-9._/+=-]*$/.test(name)) return 'must be a git branch name of letters, digits and . _ / + = -';
  return branchNameRules.find((rule) => !rule.holds(name))?.message;
}

/** A rendered branch name git accepts. */
export const isBranchName = (name: string): boolean => branchNameProblem(name) === undefined;

/**
 * Longest title: GitLab refuses a merge request title over 255 characters, and a draft's is
 * "Draft: " and the title (gitlab-forge.ts; Gitea's "WIP: " is shorter). Refused when the run is
 * accepted, not by the forge after the branch is pushed. (The default title is at most 72.)
 */
const PULL_REQUEST_TITLE_MAX = 255 - 'Draft: '.length;

export const pullRequestSpec = z
  .object({
    title: z
      .string()
      .min(1)
      .max(PULL_REQUEST_TITLE_MAX)
      // One line: it is the commit's subject, and lines of its own would be the message's trailers.
      .regex(/^[^\r\n]*$/, 'the title is one line: put the rest in pullRequest.body')
      .optional()
      .describe(
        `Title of the pull request, also the commit's subject: one line of at most ${PULL_REQUEST_TITLE_MAX} characters, so that GitLab's ` +
          '"Draft: " before it keeps within its 255. Default: the first line of spec.task, cut to 72 characters.',
      ),
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
    base: ruledString(BRANCH_TEMPLATE_PATTERN, 'must be a branch name', branchNameRules)
      .optional()
      .describe(
        "Branch the pull request asks to merge into. Default: spec.repository.revision when it names a branch on the remote (not a tag or a commit id), else the repository's default branch; publishing fails if the revision, not a commit id, names neither a branch nor a tag on the remote any longer.",
      ),
  })
  .describe('Open a pull request from the branch, or update the open one. Without it only the branch is pushed.');

export const publishSpec = z
  .object({
    branch: ruledString(
      BRANCH_TEMPLATE_PATTERN,
      'must be a git branch name of letters, digits and . _ / + = -, with {run} and {namespace} allowed',
      branchNameRules,
      BRANCH_TEMPLATE_MAX,
    )
      .default('chamvi/{run}')
      .describe(
        "Branch to push the run's change to, as a template: {run} becomes the run's name, {namespace} its namespace. Default " +
          'chamvi/{run}. An existing branch is moved only when its last commit was made by the operator for this very run (its uid); ' +
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

/**
 * spec.publish needs a token: its own, or the repository's. A run that names a template is
 * left to the operator, which checks the merged spec (the template may hold the repository's
 * token); the API server sees only the run as stored, without the template.
 */
export const publishCredentialsRule: CrossFieldRule<Record<string, unknown>> = {
  rule:
    '!has(self.publish) || has(self.templateRef) || has(self.publish.credentialsSecretRef) || ' +
    '(has(self.repository) && has(self.repository.credentialsSecretRef))',
  message:
    'spec.publish needs a token that may push: set spec.publish.credentialsSecretRef (or spec.repository.credentialsSecretRef) to a Secret holding one',
  fieldPath: '.publish',
  reason: 'FieldValueRequired',
  // The operator calls this on the effective spec, which never holds templateRef (run-template.ts).
  holds: (spec) => {
    const publish = spec.publish as { credentialsSecretRef?: unknown } | undefined;
    const repository = spec.repository as { credentialsSecretRef?: unknown } | undefined;
    return (
      publish === undefined ||
      spec.templateRef !== undefined ||
      publish.credentialsSecretRef !== undefined ||
      repository?.credentialsSecretRef !== undefined
    );
  },
};

export type PublishSpec = z.output<typeof publishSpec>;
