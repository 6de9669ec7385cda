// What spec.publish asks for, rendered for one run: the branch, the commit's message and the
// pull request's title and body. Pure and deterministic (no clock): a retried job renders the
// same plan, so it makes the same commit and finds what an earlier try made.
import { branchNameProblem, type PublishSpec } from '../api/publish-spec.ts';
import type { ForgeKind } from './forge-kinds.ts';
import { inertModelText } from './inert-model-text.ts';
import { runsQuickActions, withoutQuickActions } from './without-quick-actions.ts';

export interface PlanInput {
  namespace: string;
  name: string;
  uid: string;
  task: string;
  publish: PublishSpec;
  /** The agent's final message (status.result.summary). */
  summary: string;
  filesChanged: number;
  insertions: number;
  deletions: number;
  steps: number;
  totalTokens: number;
  /**
   * The forge the pull request goes to (forge-for-host.ts), when known: the body is made for
   * it, so the approver approves what that forge is sent. Unknown, it is made as for GitLab.
   */
  forge?: ForgeKind | undefined;
}

export interface PublishPlan {
  branch: string;
  title: string;
  commitMessage: string;
  pullRequest?: { title: string; body: string; draft: boolean; labels: readonly string[]; base?: string | undefined };
}

export type PlanResult = { ok: true; plan: PublishPlan } | { ok: false; message: string };

/**
 * The trailers that mark a commit as the operator's for a run: a branch whose head carries this
 * very run's (its name, the branch and its uid) may be moved.
 */
export const RUN_TRAILER = 'Chamvi-Run';

const TITLE_MAX = 72;

export function renderBranch(template: string, namespace: string, name: string): string {
  return template.replaceAll('{run}', name).replaceAll('{namespace}', namespace);
}

/**
 * What is wrong with the branch `template` renders to for a run, or undefined: asked when the
 * run is accepted (reconcile/validate-run.ts), so a name git refuses (`chamvi/{run}` for a run
 * named `fix.lock`) fails InvalidSpec at once rather than PublishFailed after the whole run, and
 * again when it publishes.
 */
export function renderedBranchProblem(template: string, namespace: string, name: string): string | undefined {
  const branch = renderBranch(template, namespace, name);
  const problem = branchNameProblem(branch);
  return problem && `spec.publish.branch renders to ${JSON.stringify(branch)} for this run, which ${problem}; change the template`;
}

/** The first non-empty line of the task, cut to 72 characters. */
export function defaultTitle(task: string): string {
  const line =
    task
      .split('\n')
      .find((each) => each.trim() !== '')
      ?.trim() ?? 'Change made by chamvi-operator';
  return line.length <= TITLE_MAX ? line : `${line.slice(0, TITLE_MAX - 1).trimEnd()}…`;
}

/**
 * The body when spec.publish.pullRequest.body gives none: the agent's final message, inert
 * (inert-model-text.ts: it is the model's, and posted as the token's user), then what made it.
 */
export function defaultBody(input: PlanInput): string {
  const summary = input.summary.trim();
  return [
    summary ? `The agent's final message:\n\n${inertModelText(summary)}` : '(The agent gave no final message.)',
    '',
    '---',
    `Made by CodingRun \`${input.namespace}/${input.name}\` (chamvi-operator): ${input.filesChanged} files changed, ` +
      `+${input.insertions} −${input.deletions}; ${input.steps} steps, ${input.totalTokens} tokens.`,
  ].join('\n');
}

/** The body as `forge` is sent it: without quick actions where the forge runs them (or may: not known), else as given. */
export function bodyFor(forge: ForgeKind | undefined, body: string): string {
  return runsQuickActions(forge) ? withoutQuickActions(body) : body;
}

export function planPublish(input: PlanInput): PlanResult {
  const branch = renderBranch(input.publish.branch, input.namespace, input.name);
  const problem = renderedBranchProblem(input.publish.branch, input.namespace, input.name);
  if (problem) return { ok: false, message: problem };
  const pr = input.publish.pullRequest;
  const title = pr?.title ?? defaultTitle(input.task);
  const commitMessage = [
    title,
    '',
    `Made by CodingRun ${input.namespace}/${input.name} with chamvi-operator.`,
    '',
    `${RUN_TRAILER}: ${input.namespace}/${input.name}`,
    `${RUN_TRAILER}-Branch: ${branch}`,
    `${RUN_TRAILER}-Uid: ${input.uid}`,
    '',
  ].join('\n');
  return {
    ok: true,
    plan: {
      branch,
      title,
      commitMessage,
      // The body as the forge is sent it: what the approver is shown and approves by its sha256
      // (publish-approval-input.ts) is what is posted. The model's text is inert on every forge
      // (defaultBody); the author's is changed only for a forge that runs quick actions.
      ...(pr
        ? {
            pullRequest: {
              title,
              body: bodyFor(input.forge, pr.body ?? defaultBody(input)),
              draft: pr.draft,
              labels: pr.labels,
              base: pr.base,
            },
          }
        : {}),
    },
  };
}

/** What the operator's trailers on a branch head say it was made for. */
export interface PublishedFor {
  /** `namespace/name` of the run. */
  run: string;
  branch: string;
  /** The run's metadata.uid: which run of that name, as a run deleted and made again under the name is another. */
  uid: string;
}

/**
 * The run and branch a commit message says it was made for, if any: only when the message ends
 * as planPublish ends it, with a paragraph of exactly the Chamvi-Run, Chamvi-Run-Branch and
 * Chamvi-Run-Uid trailers after a title. That paragraph is the commit's trailer block as git
 * reads it (`git log --format=%(trailers)`), each key once: a trailer quoted in a body (a
 * squash merge's summary, a contributor's note, a line in the same paragraph above the
 * operator's) names no run. The branch is named because a merge copies the commit, trailers
 * and all, to another branch (a fast-forward into `release`), which a later run of the same
 * name must not take for its own.
 */
export function publishedFor(message: string): PublishedFor | undefined {
  const lines = message.trimEnd().split('\n');
  if (lines.length < 5 || lines.at(-4) !== '' || lines.slice(0, -4).every((line) => line.trim() === '')) return undefined;
  const uid = new RegExp(`^${RUN_TRAILER}-Uid: (\\S+)$`).exec(lines.at(-1)!)?.[1];
  const branch = new RegExp(`^${RUN_TRAILER}-Branch: (\\S+)$`).exec(lines.at(-2)!)?.[1];
  const run = new RegExp(`^${RUN_TRAILER}: (\\S+)$`).exec(lines.at(-3)!)?.[1];
  return run && branch && uid ? { run, branch, uid } : undefined;
}
