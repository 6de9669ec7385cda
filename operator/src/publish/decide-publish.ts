// What publishing must still do, given what is already on the forge. Pure: the worker looks
// the branch and the pull request up first, this decides, the worker acts. That order is
// what makes publishing idempotent: a retried job or a restarted operator finds its own
// commit on the branch and its pull request open, and does nothing twice.
import { isCommitId } from '../api/commit-id.ts';
import type { PullRequest } from './forge.ts';
import { publishedFor, type PublishPlan } from './publish-plan.ts';

export interface RemoteBranch {
  /** The commit the branch points at. */
  commit: string;
  /** That commit's message (for its Chamvi-Run trailers). */
  message: string;
}

export type PushDecision =
  | { action: 'none' }
  | { action: 'create' }
  /** Move a branch the operator made for this very run (a publish tried again): only from the commit seen. */
  | { action: 'move'; from: string }
  | { action: 'refuse'; message: string };

export interface PushInput {
  branch: string;
  commit: string;
  /** `namespace/name` of the run. */
  run: string;
  /** The run's metadata.uid. */
  uid: string;
  remote: RemoteBranch | undefined;
  /**
   * Branches never moved, whatever their head says: the repository's default branch and the
   * pull request's base. A fast-forward or rebase merge of the operator's pull request puts
   * its very commit, trailers and all, at the head of the base; a later run of the same name
   * must not then force-push its change over the base.
   */
  protectedBranches: readonly string[];
  /** The repository's default branch could not be told (the remote names no HEAD, and no forge was there to ask): no existing branch is moved. */
  defaultBranchUnknown?: boolean;
}

/**
 * The branches a name given as a base or a revision may stand for on the remote, under git's
 * ref rules: as given, and without `refs/heads/`, `heads/` or `refs/` (a revision
 * `refs/heads/release` is the branch `release`). All are protected: protecting one too many
 * only refuses a move, one too few lets a base be force-pushed.
 */
export function branchesNamedBy(name: string): string[] {
  return [...new Set([name, name.replace(/^refs\/heads\//, ''), name.replace(/^heads\//, ''), name.replace(/^refs\//, '')])];
}

/** A base as the forge's API takes it: `release`, not `refs/heads/release`. */
const shortBranch = (name: string) => name.replace(/^refs\/heads\//, '');

export type BaseDecision = { ok: true; base: string | undefined } | { ok: false; message: string };

/**
 * The pull request's base: the publish spec's, else the branch the run's revision names on the
 * remote (`revisionRef`: the ref it names there, from the lookup, under git's rules, a tag before
 * a branch), as a short branch name; undefined for the repository's default branch, which a
 * tag, a commit id, no revision or another kind of ref (a forge's `refs/pull/1/head`) gets.
 * Only a branch can be a base: a run of `v1.2.0` once asked for a pull request into the tag,
 * which the forge refused after the branch was pushed.
 * A revision the remote no longer has at all is refused: a release branch deleted while the
 * approval waited once sent the pull request into the default branch, carrying every commit
 * of the release branch with it, and nobody had asked for that base.
 * So is one that names another ref than it did when the run cloned it (`clonedRef`, from the
 * run's state): a tag `release` pushed while a run of branch `release` worked is found before
 * the branch, and would send the pull request built on the branch into the default branch the
 * same way. A state from an operator that did not record the ref gives none: as before.
 */
export function pullRequestBase(
  plan: PublishPlan,
  revision: string | undefined,
  revisionRef: string | undefined,
  clonedRef?: string,
): BaseDecision {
  if (plan.pullRequest?.base !== undefined) return { ok: true, base: shortBranch(plan.pullRequest.base) };
  if (revision === undefined || isCommitId(revision)) return { ok: true, base: undefined };
  if (clonedRef !== undefined && revisionRef !== clonedRef && plan.pullRequest) {
    return {
      ok: false,
      message:
        `spec.repository.revision ${JSON.stringify(revision)} named ${clonedRef} on the remote when the run cloned it, and names ` +
        `${revisionRef ?? 'nothing'} now (a tag or branch of that name was pushed or deleted since; git takes a tag before a branch), ` +
        "so the pull request's base is not known and nothing was pushed (the default branch is not taken instead: it would get " +
        `every commit the run's ${clonedRef.startsWith('refs/heads/') ? 'branch' : 'ref'} held); set spec.publish.pullRequest.base, in a new run ` +
        'as spec.publish cannot change, or remove the ref that now takes the name',
    };
  }
  if (revisionRef?.startsWith('refs/heads/')) return { ok: true, base: revisionRef.slice('refs/heads/'.length) };
  if (revisionRef === undefined && plan.pullRequest) {
    return {
      ok: false,
      message:
        `spec.repository.revision ${JSON.stringify(revision)} no longer names a branch or a tag on the remote (was it deleted?), ` +
        "so the pull request's base is not known and nothing was pushed (the default branch is not taken instead: it would get " +
        'every commit that branch held); set spec.publish.pullRequest.base, in a new run as spec.publish cannot change',
    };
  }
  return { ok: true, base: undefined };
}

/**
 * The base as the approver is shown it, before the remote is asked what the revision names:
 * what pullRequestBase will find, said as a rule where it depends on the remote.
 */
export function describedBase(plan: PublishPlan, revision: string | undefined): string {
  if (plan.pullRequest?.base !== undefined) return shortBranch(plan.pullRequest.base);
  if (revision === undefined || isCommitId(revision)) return "(the repository's default branch)";
  return (
    `${shortBranch(revision)} if the revision names a branch on the remote, the repository's default branch if it names a tag; ` +
    'publishing fails if it names neither, or another ref than when the run cloned it'
  );
}

export function decidePush(input: PushInput): PushDecision {
  const { remote } = input;
  if (!remote) return { action: 'create' };
  if (remote.commit === input.commit) return { action: 'none' };
  if (input.protectedBranches.flatMap(branchesNamedBy).includes(input.branch)) {
    return {
      action: 'refuse',
      message:
        `branch ${input.branch} is the repository's default branch or the pull request's base, which the operator never moves; ` +
        "set spec.publish.branch to a branch of the run's own, such as chamvi/{run}",
    };
  }
  const madeFor = publishedFor(remote.message);
  if (madeFor?.run !== input.run || madeFor.branch !== input.branch) {
    return {
      action: 'refuse',
      message:
        `branch ${input.branch} already exists at ${remote.commit.slice(0, 12)}, which the operator did not make for run ${input.run} on this branch; ` +
        'it is left alone: set spec.publish.branch to a new branch, or delete that one',
    };
  }
  // A run deleted and made again under its name is another run, whoever made it: the branch,
  // its pull request and the approvals given there are the first run's. The creator
  // annotation is no proof of the same author (without the chart's separation-of-duties
  // policy it is whatever the run's writer says, and under GitOps it names the tool).
  if (madeFor.uid !== input.uid) {
    // Cut: anyone who may push can write that trailer, and this message goes to status.
    const other = madeFor.uid.length > 64 ? `${madeFor.uid.slice(0, 64)}…` : madeFor.uid;
    return {
      action: 'refuse',
      message:
        `branch ${input.branch} was made for another run named ${input.run} (uid ${other}), which was deleted or replaced; ` +
        'it is left alone, and so is its pull request. To publish this run there, close that pull request and delete the branch, ' +
        'then create the run again; or create it with another spec.publish.branch (or another name)',
    };
  }
  if (input.defaultBranchUnknown) {
    return {
      action: 'refuse',
      message:
        `branch ${input.branch} exists, and the repository's default branch, which the operator never moves, cannot be told ` +
        '(the remote names no HEAD and no forge API is configured for the host); set spec.publish.branch to a new branch',
    };
  }
  return { action: 'move', from: remote.commit };
}

export type PullRequestDecision =
  { action: 'create' } | { action: 'update'; number: number } | { action: 'keep'; pullRequest: PullRequest };

export function decidePullRequest(existing: PullRequest | undefined, wanted: { title: string; body: string }): PullRequestDecision {
  if (!existing) return { action: 'create' };
  // Forges may trim or normalise line ends in a body: compared as they store it.
  const same = (a: string, b: string) => a.replace(/\r\n/g, '\n').trim() === b.replace(/\r\n/g, '\n').trim();
  if (same(existing.title, wanted.title) && same(existing.body, wanted.body)) return { action: 'keep', pullRequest: existing };
  return { action: 'update', number: existing.number };
}
