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
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CodingRun, CodingRunStatus } from '../../operator/src/api/index.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import { diffSha } from '../../operator/src/reconcile/diff-config-map.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { CancelRequestedError } from '../../operator/src/workers/errors/cancel-requested-error.ts';
import { CANCEL_RECHECK_DELAY_MS, decideJobFailure } from '../../operator/src/workers/job-failure.ts';
import { runPublishJob } from '../../operator/src/workers/publish-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { createBareRepository, git } from '../support/git-fixture.ts';
import { startGitHttpServer, type GitHttpServer } from '../support/git-http-server.ts';

const TOKEN = 'publish-job-stopped-token';
const DIFF = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n';
const ref = { uid: 'uid-1', namespace: 'ns', name: 'r' };

let base: string;
let bare: string;
let server: GitHttpServer;
let forge: { server: Server; origin: string; opened: string[] };

/** A forge API (Gitea's paths): default branch main, no open pull request; each one asked for is opened and its head recorded. */
async function startForge(): Promise<typeof forge> {
  const opened: string[] = [];
  const api = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    request.on('end', () => {
      response.setHeader('content-type', 'application/json');
      if (request.method === 'POST' && request.url?.endsWith('/pulls')) {
        const asked = JSON.parse(text) as { head: string; title: string; body: string };
        opened.push(asked.head);
        response
          .writeHead(201)
          .end(JSON.stringify({ number: 1, html_url: 'https://forge.example/pulls/1', title: asked.title, body: asked.body }));
      } else if (request.method === 'GET' && request.url?.includes('/pulls?')) response.end('[]');
      else if (request.method === 'GET' && /^\/api\/v1\/repos\/[^/]+$/.test(request.url ?? '')) response.end('{"default_branch":"main"}');
      else response.writeHead(404).end('{"message":"not here"}');
    });
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  return { server: api, origin: `http://127.0.0.1:${(api.address() as AddressInfo).port}`, opened };
}

beforeEach(async () => {
  base = mkdtempSync(join(tmpdir(), 'chamvi-publish-stopped-'));
  bare = createBareRepository(base).slice('file://'.length);
  server = await startGitHttpServer(join(base, 'git'), TOKEN);
  forge = await startForge();
});
afterEach(async () => {
  await server.close();
  await new Promise((resolve) => forge.server.close(resolve));
  rmSync(base, { recursive: true, force: true });
});

/** Run ns/r, Running, publishing to chamvi/r with a pull request; `metadata` over its own. */
function runWith(metadata: Partial<CodingRun['metadata']> = {}): CodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { ...ref, generation: 1, creationTimestamp: '2026-12-05T00:00:00Z', ...metadata },
    spec: {
      task: 'Greet the world',
      repository: { url: `${server.origin}/hello.git`, revision: 'main', credentialsSecretRef: { name: 'git', key: 'token' } },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
      publish: { branch: 'chamvi/r', pullRequest: {} },
    },
    status: { phase: 'Running', result: { summary: 'Greeted the world.' } },
  } as unknown as CodingRun;
}
const cancelled = () => runWith({ annotations: { [CANCEL_ANNOTATION]: 'wrong branch' } });
const deleted = () => runWith({ deletionTimestamp: '2026-12-05T00:30:00Z', finalizers: ['chamvi.dev/agent'] });

/**
 * The publish job's dependencies: its first look reads `first`; its fresh reads (before the push,
 * before the pull request, after a stop) read `fresh` in turn, the last one again. Records what
 * the job did.
 */
function publishing(first: CodingRun, fresh: CodingRun[]) {
  const state = {
    ...ref,
    stage: 'publishing',
    publish: { diffSha256: diffSha(DIFF) },
    revision: git(['rev-parse', 'main^{commit}'], bare).trim(),
    step: 1,
    usage: { totalTokens: 0 },
    startedAt: Date.parse('2026-12-05T00:00:00Z'),
  } as unknown as RunState;
  const done = { statuses: [] as CodingRunStatus[], events: [] as string[], tokensRead: 0, diffsRead: 0, statesDeleted: 0 };
  let reads = 0;
  const deps = {
    states: { load: async () => state, save: async () => undefined, delete: async () => void done.statesDeleted++ },
    getRun: async () => first,
    getRunFresh: async () => fresh[Math.min(reads++, fresh.length - 1)],
    clonePolicy: { allowRepo: [`${server.origin}/**`], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 1_000 },
    resources: {
      secretValue: async () => (done.tokensRead++, TOKEN),
      readDiff: async () => (done.diffsRead++, { diff: DIFF, configMap: 'r-diff' }),
    },
    publishPolicy: {
      author: { name: 'chamvi test', email: 'chamvi@example.test' },
      forges: [{ host: server.origin.slice('http://'.length), kind: 'gitea', apiURL: `${forge.origin}/api/v1` }],
    },
    status: {
      write: async (
        _namespace: string,
        _name: string,
        _uid: string,
        change: (status: CodingRunStatus, current: CodingRun) => CodingRunStatus,
      ) => {
        done.statuses.push(change(structuredClone(first.status!), first));
        return { written: true, run: first };
      },
    },
    events: { record: async (_run: CodingRun, event: { message: string }) => void done.events.push(event.message) },
    sandboxes: { release: async () => undefined },
    metrics: { runsFinished: { inc() {} }, runDuration: { observe() {} } },
    logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
    now: () => new Date('2026-12-05T01:00:00Z'),
  } as unknown as AgentDependencies;
  return { deps, done };
}

const branchOnRemote = () => git(['ls-remote', bare, 'refs/heads/chamvi/r'], bare).trim();

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
    expect(server.served).toBe(0);
    // The state stays for the controller's ending, which takes the diff against its commit.
    expect(done.statesDeleted).toBe(0);
    expect(done.statuses).toEqual([]);
  });

  it('asked for between the push and the pull request, is put off there; the cancel withdrawn, its next try opens it', async () => {
    const { deps, done } = publishing(runWith(), [runWith(), cancelled()]);
    const error = await runPublishJob(deps, ref).catch((thrown: unknown) => thrown);
    expect(CancelRequestedError.isInstance(error)).toBe(true);
    expect(branchOnRemote()).not.toBe('');
    expect(forge.opened).toEqual([]);
    expect(done.events).toEqual(['Pushed branch chamvi/r (no pull request opened): the run was cancelled while it was published']);
    expect(done.statesDeleted).toBe(0);

    const retry = publishing(runWith(), [runWith()]);
    await runPublishJob(retry.deps, ref);
    expect(forge.opened).toEqual(['chamvi/r']);
    expect(retry.done.statuses.at(-1)).toMatchObject({ phase: 'Succeeded' });
  });
});

describe('the publish job of a run deleted between the push and the pull request', () => {
  it('says the run was deleted, not that its spec was refused, and lets the run go', async () => {
    const { deps, done } = publishing(runWith(), [runWith(), deleted()]);
    await runPublishJob(deps, ref);
    expect(branchOnRemote()).not.toBe('');
    expect(forge.opened).toEqual([]);
    expect(done.events).toEqual(['Pushed branch chamvi/r (no pull request opened): the run was deleted while it was published']);
    expect(done.statuses).toEqual([]);
    expect(done.statesDeleted).toBe(1);
  });
});
