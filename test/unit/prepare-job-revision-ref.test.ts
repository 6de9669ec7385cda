// The prepare job records, in the run's state, the ref spec.repository.revision named on the
// remote when the run cloned it (refs/heads/release, refs/tags/v1): publishing takes the pull
// request's base from it, and refuses a revision that names another ref by then (a tag pushed
// with a release branch's name once sent a pull request built on the branch into main). Cloned
// and from the clone cache alike. Real git (file://), a sandbox that takes any archive.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { CloneCache } from '../../operator/src/workers/clone-cache.ts';
import { runPrepareJob } from '../../operator/src/workers/prepare-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { createBareRepository, git } from '../support/git-fixture.ts';
import { prepareJobHarness } from '../support/prepare-job-harness.ts';

const scratch = mkdtempSync(join(tmpdir(), 'prepare-revision-ref-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const caches: CloneCache[] = [];
afterEach(async () => {
  await Promise.all(caches.splice(0).map((cache) => cache.clear()));
});

/** A bare repository with branch develop, and a tag and a branch both named `both`. */
function repository(): string {
  const root = mkdtempSync(join(scratch, 'repo-'));
  const url = createBareRepository(root);
  const bare = join(root, 'git', 'hello.git');
  git(['branch', 'develop', 'main'], bare);
  git(['branch', 'both', 'main'], bare);
  git(['tag', 'both', 'main'], bare);
  return url;
}

/** The state the prepare job saves for a run of `url` at `revision`. */
async function preparedState(url: string, revision: string | undefined, cache?: CloneCache): Promise<RunState> {
  const { deps, run } = prepareJobHarness(url, [`file://${scratch}/**`]);
  if (revision !== undefined) run.spec.repository.revision = revision;
  deps.sandboxes.for = () => ({
    open: async () => undefined,
    close: async () => undefined,
    importTree: async (tar: AsyncIterable<Uint8Array> | NodeJS.ReadableStream) => {
      for await (const _ of tar as AsyncIterable<Uint8Array>);
    },
    call: async (): Promise<ToolResponse> =>
      ({ ok: true, result: { exitCode: 0, stdout: '', stderr: '', timedOut: false } }) as ToolResponse,
  });
  const created: RunState[] = [];
  deps.states = {
    load: async () => undefined,
    create: async (state: RunState) => {
      created.push(state);
      return true;
    },
  } as unknown as typeof deps.states;
  deps.queue = { step: async () => undefined } as unknown as typeof deps.queue;
  deps.metrics = { ...deps.metrics, cloneCache: { inc: () => undefined } } as unknown as typeof deps.metrics;
  if (cache) deps.cloneCache = cache;
  await runPrepareJob(deps, { uid: 'uid-1', namespace: 'ns', name: 'r' }, 'pod-1');
  expect(created).toHaveLength(1);
  return created[0]!;
}

describe('the ref the revision named at the clone, in the run state', { timeout: 60_000 }, () => {
  it.each([
    ['a branch', 'develop', 'refs/heads/develop'],
    ['a name a tag and a branch have: the tag, as git fetch took it', 'both', 'refs/tags/both'],
    ['no revision: none (the default branch is the base)', undefined, undefined],
  ])('is recorded for %s, cloned and then from the clone cache', async (_, revision, expected) => {
    const url = repository();
    expect((await preparedState(url, revision)).revisionRef).toBe(expected);
    const cache = new CloneCache(1024 ** 3);
    caches.push(cache);
    expect((await preparedState(url, revision, cache)).revisionRef).toBe(expected); // a miss: cloned
    expect(cache.size.archives).toBe(1);
    expect((await preparedState(url, revision, cache)).revisionRef).toBe(expected); // a hit: from ls-remote
  });
});
