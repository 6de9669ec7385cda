// The publish job of a run that is stopped as it is published, over real git and a real git
// server (smart HTTP, git http-backend), a loopback forge API that records the pull requests
// asked for, and in-memory recorders for the rest.
// - A run with a cancel requested was still published up to the push: the repository checked,
//   the push token read, the diff read and the repository cloned with the token, before the look
//   before the push stopped it; then the job was done with, so a cancel withdrawn left the state
//   in `publishing` with no job, and the run ended Failed StateLost. Now the job is put off at
//   its start (CancelRequestedError), as every other job is, having done none of that.
// - A cancel requested between the push and the pull request stops the job there; it is put off
//   too, and a cancel withdrawn lets its next try open the pull request.
// - A run deleted between the push and the pull request was said, in the Warning Event about the
//   branch pushed, to have "had its spec refused by this operator".
import { describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import { CancelRequestedError } from '../../operator/src/workers/errors/cancel-requested-error.ts';
import { CANCEL_RECHECK_DELAY_MS, decideJobFailure } from '../../operator/src/workers/job-failure.ts';
import { runPublishJob } from '../../operator/src/workers/publish-job.ts';
import {
  branchOnRemote,
  publishJobDependencies,
  publishRemote,
  publishingRun,
  publishingState,
  runRef as ref,
} from '../support/publish-job-harness.ts';

const remote = publishRemote();

/** Run ns/r, Running, publishing to chamvi/r with a pull request; `metadata` over its own. */
const runWith = (metadata: Partial<ParsedCodingRun['metadata']> = {}) => publishingRun(remote, { metadata });
const cancelled = () => runWith({ annotations: { [CANCEL_ANNOTATION]: 'wrong branch' } });
const deleted = () => runWith({ deletionTimestamp: '2026-12-05T00:30:00Z', finalizers: ['chamvi.dev/agent'] });

/**
 * The publish job's dependencies: its first look reads `first`; its fresh reads (before the push,
 * before the pull request, after a stop) read `fresh` in turn, the last one again. Records what
 * the job did.
 */
const publishing = (first: ParsedCodingRun, fresh: ParsedCodingRun[]) =>
  publishJobDependencies(remote, first, publishingState(remote), fresh);

describe('the publish job of a run with a cancel requested', () => {
  it('is put off at its start, its tries unspent, having read no token nor diff and cloned nothing', async () => {
    const { deps, done } = publishing(cancelled(), [cancelled()]);
    const error = await runPublishJob(deps, ref).catch((thrown: unknown) => thrown);
    expect(CancelRequestedError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('did not push the branch or open the pull request');
    expect(decideJobFailure(error, { name: 'publish', attempt: 1, attempts: 10 })).toMatchObject({
      action: 'delay',
      delayMs: CANCEL_RECHECK_DELAY_MS,
    });
    expect(done.tokensRead).toBe(0);
    expect(done.diffsRead).toBe(0);
    expect(remote.server.served).toBe(0);
    // The state stays for the controller's ending, which takes the diff against its commit.
    expect(done.statesDeleted).toBe(0);
    expect(done.statuses).toEqual([]);
  });

  it('asked for between the push and the pull request, is put off there; the cancel withdrawn, its next try opens it', async () => {
    const { deps, done } = publishing(runWith(), [runWith(), cancelled()]);
    const error = await runPublishJob(deps, ref).catch((thrown: unknown) => thrown);
    expect(CancelRequestedError.isInstance(error)).toBe(true);
    expect(branchOnRemote(remote, 'chamvi/r')).not.toBe('');
    expect(remote.forge.opened).toEqual([]);
    expect(done.events).toEqual(['Pushed branch chamvi/r (no pull request opened): the run was cancelled while it was published']);
    expect(done.statesDeleted).toBe(0);

    const retry = publishing(runWith(), [runWith()]);
    await runPublishJob(retry.deps, ref);
    expect(remote.forge.opened).toMatchObject([{ head: 'chamvi/r' }]);
    expect(retry.done.statuses.at(-1)).toMatchObject({ phase: 'Succeeded' });
  });
});

describe('the publish job of a run deleted between the push and the pull request', () => {
  it('says the run was deleted, not that its spec was refused, and lets the run go', async () => {
    const { deps, done } = publishing(runWith(), [runWith(), deleted()]);
    await runPublishJob(deps, ref);
    expect(branchOnRemote(remote, 'chamvi/r')).not.toBe('');
    expect(remote.forge.opened).toEqual([]);
    expect(done.events).toEqual(['Pushed branch chamvi/r (no pull request opened): the run was deleted while it was published']);
    expect(done.statuses).toEqual([]);
    expect(done.statesDeleted).toBe(1);
  });
});
