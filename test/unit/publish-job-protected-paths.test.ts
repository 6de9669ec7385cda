// A diff that changes spec.verify.protect paths is not published. They are restored before each
// check and the approver is told they show no change (docs/verify.md), but the diff is taken
// after the check, and what the check ran (a module the tests import that rewrites them at
// exit, a clean filter) could change them then: such a run ended Succeeded and its diff was
// pushed as a pull request. Now startPublish (the finalize job's hand-over) and the publish job
// (before the clone) refuse it PublishFailed, nothing pushed. Over real git and a real git
// server (smart HTTP), a loopback forge API, and in-memory recorders for the rest.
import { describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import type { KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';
import { decideJobFailure } from '../../operator/src/workers/job-failure.ts';
import { runPublishJob, startPublish } from '../../operator/src/workers/publish-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import {
  branchOnRemote,
  commitOf,
  DIFF,
  publishJobDependencies,
  publishRemote,
  publishingRun,
  publishingState,
  runRef,
  STARTED_AT,
} from '../support/publish-job-harness.ts';

const remote = publishRemote();

/** Run ns/r publishing with a pull request, its check protecting `protect` (the harness's DIFF changes README.md). */
function protecting(protect: string[]): ParsedCodingRun {
  const run = publishingRun(remote);
  Object.assign(run.spec, { verify: { command: 'npm test', protect, required: true, retries: 0, timeout: '10m' } });
  return run;
}

const kept: KeptDiff = { source: 'final', diff: DIFF, truncated: false, filesChanged: 1, insertions: 1, deletions: 1, configMap: 'r-diff' };

const failure = (error: unknown) => decideJobFailure(error, { name: 'publish', attempt: 1, attempts: 10 });

describe('publishing a diff that changes protected paths', () => {
  it('is refused by the finalize job PublishFailed, naming the path, with the run neither parked nor handed on', async () => {
    const run = protecting(['README.md']);
    const state = {
      ...runRef,
      stage: 'finalizing',
      revision: commitOf(remote, 'main'),
      step: 1,
      usage: { totalTokens: 0 },
      startedAt: Date.parse(STARTED_AT),
    } as unknown as RunState;
    const { deps, done } = publishJobDependencies(remote, run, state);
    const error = await startPublish(deps, run, state, kept, 'Greeted the world.').catch((e: unknown) => e);
    expect(failure(error)).toMatchObject({ action: 'fail', reason: 'PublishFailed' });
    expect((error as Error).message).toMatch(/the diff changes "README.md", which spec.verify.protect protects, so nothing was pushed/);
    expect(state.stage).toBe('finalizing');
    expect(done.statuses).toEqual([]);
  });

  it('is refused by the publish job PublishFailed before anything is pushed or opened', async () => {
    const run = protecting(['README.md']);
    const { deps } = publishJobDependencies(remote, run, publishingState(remote));
    const error = await runPublishJob(deps, runRef).catch((e: unknown) => e);
    expect(failure(error)).toMatchObject({ action: 'fail', reason: 'PublishFailed' });
    expect((error as Error).message).toMatch(/the diff changes "README.md", which spec.verify.protect protects/);
    expect(branchOnRemote(remote, 'chamvi/r')).toBe('');
    expect(remote.forge.opened).toEqual([]);
  });

  it('goes ahead when the protected paths are not in the diff', async () => {
    const run = protecting(['test', 'package.json']);
    const { deps } = publishJobDependencies(remote, run, publishingState(remote));
    await runPublishJob(deps, runRef);
    expect(branchOnRemote(remote, 'chamvi/r')).not.toBe('');
    expect(run.status).toMatchObject({ phase: 'Succeeded', result: { published: { branch: 'chamvi/r' } } });
  });
});
