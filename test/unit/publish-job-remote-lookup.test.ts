// The publish job end to end over real git and a real git server (smart HTTP, git http-backend),
// a loopback forge API that records the pull requests asked for, and in-memory recorders for
// the rest: what the job decides from its look at the remote.
// - A remote whose refs ending in /HEAD fill more than a megabyte after main's (anyone who may
//   push can make them) once hid main and the remote's HEAD from the lookup, which kept only
//   the listing's last megabyte: a run publishing to main pushed onto it, a fast-forward, with
//   no lease. Now main is seen for the default branch it is, and the run fails PublishFailed
//   with main as it was; a run publishing to a branch of its own still publishes (the control).
// - A run of a tag (revision v1.2.0) asked for a pull request into the tag, which a forge
//   refuses, after the branch was pushed: only a branch revision is the default base.
// - A run of release branch rel, while it worked or its approval waited, had a tag rel pushed:
//   publishing found the tag first (git's rules), took the default branch for the base and
//   opened the pull request built on rel into main. The clone records the ref it took
//   (state.revisionRef); a revision that names another ref by the publish now fails
//   PublishFailed with nothing pushed. A state from an operator before that field: as before.
// - A run of a release branch deleted while its approval waited opened its pull request into
//   the default branch, carrying the release branch's commits: such a run now fails
//   PublishFailed with nothing pushed, unless spec.publish.pullRequest.base names the base.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decideJobFailure } from '../../operator/src/workers/job-failure.ts';
import { runPublishJob } from '../../operator/src/workers/publish-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { git } from '../support/git-fixture.ts';
import {
  branchOnRemote,
  commitOf,
  publishJobDependencies,
  publishRemote,
  publishingRun,
  publishingState,
  runRef,
} from '../support/publish-job-harness.ts';

const remote = publishRemote();

/** Refs refs/heads/zz<i>/<3.5 KB>/HEAD at main's commit, packed as a server keeps them; they sort after main. */
function addLongRefs(count: number): void {
  git(['pack-refs', '--all', '--prune'], remote.bare);
  const main = commitOf(remote, 'main');
  const long = Array.from({ length: 17 }, () => 'x'.repeat(200)).join('/');
  const file = join(remote.bare, 'packed-refs');
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'));
  for (let i = 0; i < count; i++) lines.push(`${main} refs/heads/zz${i}/${long}/HEAD`);
  const name = (line: string) => line.slice(line.indexOf(' ') + 1);
  lines.sort((a, b) => (name(a) < name(b) ? -1 : name(a) > name(b) ? 1 : 0));
  writeFileSync(file, `# pack-refs with: peeled fully-peeled sorted \n${lines.join('\n')}\n`);
}

/** The publish job's dependencies for run ns/r of `revision`, publishing as `publish` says, and what it wrote. */
function publishing(publish: object, revision = 'main', cloned: Partial<RunState> = {}) {
  const run = publishingRun(remote, { publish, revision });
  const { deps, done } = publishJobDependencies(remote, run, publishingState(remote, revision, cloned));
  return { deps, statuses: done.statuses, ref: runRef };
}

describe('the publish job, on a remote with a megabyte of refs ending in /HEAD after main', () => {
  it('fails PublishFailed publishing to main, which it sees as the default branch, and leaves main as it was', async () => {
    addLongRefs(300);
    const main = commitOf(remote, 'main');
    const { deps, ref } = publishing({ branch: 'main' });
    const error = await runPublishJob(deps, ref).catch((e: unknown) => e);
    expect(decideJobFailure(error, { name: 'publish', attempt: 1, attempts: 10 })).toMatchObject({
      action: 'fail',
      reason: 'PublishFailed',
    });
    expect((error as Error).message).toMatch(
      /branch main is the repository's default branch or the pull request's base, which the operator never moves/,
    );
    expect(commitOf(remote, 'main')).toBe(main);
    expect(remote.server.served).toBeGreaterThan(0);
  });

  it("publishes to a branch of the run's own there (the control)", async () => {
    addLongRefs(300);
    const { deps, statuses, ref } = publishing({ branch: 'chamvi/r' });
    await runPublishJob(deps, ref);
    const commit = git(['rev-parse', 'refs/heads/chamvi/r'], remote.bare).trim();
    expect(git(['rev-parse', `${commit}^`], remote.bare).trim()).toBe(commitOf(remote, 'main'));
    expect(statuses.at(-1)).toMatchObject({ phase: 'Succeeded', result: { published: { branch: 'chamvi/r', commit } } });
  });
});

describe("the publish job's pull request base, with no spec.publish.pullRequest.base", () => {
  it.each([
    ['a tag: the default branch', 'v1.2.0', 'main'],
    ['a branch: that branch', 'develop', 'develop'],
    ['a name both a tag and a branch have: the tag, as the clone took it, so the default branch', 'both', 'main'],
  ])('is, for a revision that is %s', async (_, revision, expected) => {
    const main = commitOf(remote, 'main');
    git(['tag', 'v1.2.0', main], remote.bare);
    git(['branch', 'develop', main], remote.bare);
    git(['tag', 'both', main], remote.bare);
    git(['branch', 'both', main], remote.bare);
    const { deps, statuses, ref } = publishing({ branch: 'chamvi/r', pullRequest: {} }, revision);
    await runPublishJob(deps, ref);
    expect(remote.forge.opened).toMatchObject([{ head: 'chamvi/r', base: expected }]);
    expect(statuses.at(-1)).toMatchObject({
      phase: 'Succeeded',
      result: { published: { branch: 'chamvi/r', pullRequest: { number: 1 } } },
    });
  });
});

describe('the publish job, when the branch spec.repository.revision named is gone from the remote', () => {
  /** Branch rel, one commit past main, from which the run started (a tag keeps its commit, as a merge would); deleted on the remote later. */
  function releaseBranchDeleted(): void {
    const work = join(remote.dir, 'rel-work');
    git(['clone', '-q', remote.bare, work], remote.dir);
    git(['commit', '-q', '--allow-empty', '-m', 'release prep'], work);
    git(['push', '-q', 'origin', 'HEAD:refs/heads/rel', 'HEAD:refs/tags/kept-for-the-commit'], work);
  }

  it('fails PublishFailed with nothing pushed and no pull request, rather than open it into the default branch', async () => {
    releaseBranchDeleted();
    const { deps, ref } = publishing({ branch: 'chamvi/r', pullRequest: {} }, 'rel');
    git(['update-ref', '-d', 'refs/heads/rel'], remote.bare);
    const error = await runPublishJob(deps, ref).catch((e: unknown) => e);
    expect(decideJobFailure(error, { name: 'publish', attempt: 1, attempts: 10 })).toMatchObject({
      action: 'fail',
      reason: 'PublishFailed',
    });
    expect((error as Error).message).toMatch(
      /spec\.repository\.revision "rel" no longer names a branch or a tag on the remote .*nothing was pushed.*set spec\.publish\.pullRequest\.base/,
    );
    expect(remote.forge.opened).toEqual([]);
    expect(branchOnRemote(remote, 'chamvi/r')).toBe('');
  });

  it('publishes into the base spec.publish.pullRequest.base names (the control)', async () => {
    releaseBranchDeleted();
    const { deps, statuses, ref } = publishing({ branch: 'chamvi/r', pullRequest: { base: 'main' } }, 'rel');
    git(['update-ref', '-d', 'refs/heads/rel'], remote.bare);
    await runPublishJob(deps, ref);
    expect(remote.forge.opened).toMatchObject([{ head: 'chamvi/r', base: 'main' }]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Succeeded' });
  });
});

describe('the publish job, when a tag named as the branch spec.repository.revision named is pushed after the clone', () => {
  /** Branch rel, one commit past main, from which the run started; then a tag rel, at main, pushed by someone else. */
  function releaseBranch(): void {
    const work = join(remote.dir, 'rel-work');
    git(['clone', '-q', remote.bare, work], remote.dir);
    git(['commit', '-q', '--allow-empty', '-m', 'release prep'], work);
    git(['push', '-q', 'origin', 'HEAD:refs/heads/rel'], work);
  }
  const tagPushed = () => git(['tag', 'rel', 'main'], remote.bare);

  it('fails PublishFailed with nothing pushed and no pull request, rather than open it into the default branch', async () => {
    releaseBranch();
    const { deps, ref } = publishing({ branch: 'chamvi/r', pullRequest: {} }, 'rel', { revisionRef: 'refs/heads/rel' });
    tagPushed();
    const error = await runPublishJob(deps, ref).catch((e: unknown) => e);
    expect(decideJobFailure(error, { name: 'publish', attempt: 1, attempts: 10 })).toMatchObject({
      action: 'fail',
      reason: 'PublishFailed',
    });
    expect((error as Error).message).toMatch(
      /spec\.repository\.revision "rel" named refs\/heads\/rel on the remote when the run cloned it, and names refs\/tags\/rel now.*nothing was pushed/,
    );
    expect(remote.forge.opened).toEqual([]);
    expect(branchOnRemote(remote, 'chamvi/r')).toBe('');
  });

  it('opens the pull request into the branch when no tag came (the control)', async () => {
    releaseBranch();
    const { deps, statuses, ref } = publishing({ branch: 'chamvi/r', pullRequest: {} }, 'rel', { revisionRef: 'refs/heads/rel' });
    await runPublishJob(deps, ref);
    expect(remote.forge.opened).toMatchObject([{ head: 'chamvi/r', base: 'rel' }]);
    expect(statuses.at(-1)).toMatchObject({ phase: 'Succeeded' });
  });

  it('keeps the behaviour of a state saved by an operator that recorded no ref at the clone: the tag, so the default branch', async () => {
    releaseBranch();
    const { deps, ref } = publishing({ branch: 'chamvi/r', pullRequest: {} }, 'rel');
    tagPushed();
    await runPublishJob(deps, ref);
    expect(remote.forge.opened).toMatchObject([{ head: 'chamvi/r', base: 'main' }]);
  });
});
