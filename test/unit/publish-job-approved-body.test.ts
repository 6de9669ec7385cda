// The pull request body an approver approves is the body the publish job posts. From the finalize
// job's startPublish (the run parked for approval.publish), through the approval, to the publish
// job, over real git and a real git server (smart HTTP), a loopback forge API that records what
// it is asked to open, and in-memory recorders for the rest.
// - The approval's body once said the counts the sandbox's `git diff --shortstat` printed (code
//   in the sandbox can print any), and the job re-planned it from the diff's own counts: the
//   body posted was not the one approved, whose sha256 nobody compared again. Both now count the
//   diff's text, and the job refuses a body whose sha256 is not the one approved.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { countDiff, type KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';
import { decideJobFailure } from '../../operator/src/workers/job-failure.ts';
import { answerPublishApproval, runPublishJob, startPublish } from '../../operator/src/workers/publish-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import {
  branchOnRemote,
  commitOf,
  DIFF,
  publishJobDependencies,
  publishRemote,
  publishingRun,
  runRef,
  STARTED_AT,
} from '../support/publish-job-harness.ts';

const remote = publishRemote();

/** The bodies of the pull requests the forge was asked to open. */
const bodiesPosted = () => remote.forge.opened.map((pull) => pull.body);

/** Run ns/r, publishing with a pull request after approval, its state as finalize has it, and the workers' dependencies over them. */
function world() {
  const run = publishingRun(remote, { publish: { pullRequest: {} }, approval: { publish: true }, status: { phase: 'Running' } });
  const state = {
    ...runRef,
    stage: 'finalizing',
    revision: commitOf(remote, 'main'),
    step: 3,
    toolCalls: 4,
    usage: { totalTokens: 1234 },
    startedAt: Date.parse(STARTED_AT),
  } as unknown as RunState;
  return { run, state, deps: publishJobDependencies(remote, run, state).deps, ref: runRef };
}

/** The diff as the finalize job keeps it, with the counts the sandbox's shortstat line said: not the diff's. */
const kept: KeptDiff = { source: 'final', diff: DIFF, truncated: false, filesChanged: 3, insertions: 7, deletions: 0, configMap: 'r-diff' };

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** Finalize parks the run, an approver approves it; the bodySha256 they approved. */
async function approved(w: ReturnType<typeof world>): Promise<string> {
  expect(await startPublish(w.deps, w.run, w.state, kept, 'Greeted the world.')).toBe(true);
  const input = w.state.pendingApproval!.input as { pullRequest: { body: string; bodySha256: string }; diff: object };
  await answerPublishApproval(w.deps, w.run, w.state, { id: 'publish', decision: 'approve', user: 'alice' });
  expect(w.state.stage).toBe('publishing');
  return input.pullRequest.bodySha256;
}

describe('the body a publish approver approves', () => {
  it("is the body posted, though the sandbox's shortstat counted otherwise", async () => {
    // The control: the counts finalize was handed are not the diff's.
    expect(countDiff(DIFF)).not.toMatchObject({ filesChanged: kept.filesChanged, insertions: kept.insertions });
    const w = world();
    const bodySha256 = await approved(w);
    expect(w.state.pendingApproval).toBeUndefined();
    await runPublishJob(w.deps, w.ref);
    expect(bodiesPosted()).toHaveLength(1);
    expect(sha256(bodiesPosted()[0]!)).toBe(bodySha256);
    expect(bodiesPosted()[0]).toContain('1 files changed, +1 −1');
    expect(w.run.status).toMatchObject({ phase: 'Succeeded', result: { published: { branch: 'chamvi/r', pullRequest: { number: 1 } } } });
  });

  it('is shown with the counts of the diff itself', async () => {
    const w = world();
    await startPublish(w.deps, w.run, w.state, kept, 'Greeted the world.');
    expect(w.state.pendingApproval!.input).toMatchObject({
      diff: { filesChanged: 1, insertions: 1, deletions: 1 },
      pullRequest: { body: expect.stringContaining('1 files changed, +1 −1') as unknown },
    });
  });

  it("is the author's own body as written on Gitea, a `/` line in its code block too, and planned alike at both ends", async () => {
    // GitLab's quick actions once cost every forge a space before such a line, shown in the block.
    const body = 'Run it so:\n\n```sh\n/usr/bin/env node build.js\n```\n';
    const w = world();
    w.run.spec.publish!.pullRequest!.body = body;
    const bodySha256 = await approved(w);
    expect(bodySha256).toBe(sha256(body));
    await runPublishJob(w.deps, w.ref);
    expect(bodiesPosted()).toEqual([body]);
  });

  it('fails the publish PublishFailed, with nothing pushed or posted, when the body planned at publish is another', async () => {
    const w = world();
    await approved(w);
    // Anyone who may write the run's status can change the summary the job plans the body from.
    w.run.status!.result!.summary = 'Greeted the world. Also: @org/everyone please merge.';
    const error = await runPublishJob(w.deps, w.ref).catch((e: unknown) => e);
    expect(decideJobFailure(error, { name: 'publish', attempt: 1, attempts: 10 })).toMatchObject({
      action: 'fail',
      reason: 'PublishFailed',
    });
    expect((error as Error).message).toMatch(
      /the pull request's body planned now is not the one planned when the run ended .*nothing was pushed/,
    );
    expect(bodiesPosted()).toEqual([]);
    expect(branchOnRemote(remote, 'chamvi/r')).toBe('');
  });
});
