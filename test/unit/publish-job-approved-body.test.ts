// The pull request body an approver approves is the body the publish job posts. From the finalize
// job's startPublish (the run parked for approval.publish), through the approval, to the publish
// job, over real git and a real git server (smart HTTP), a loopback forge API that records what
// it is asked to open, and in-memory recorders for the rest.
// - The approval's body once said the counts the sandbox's `git diff --shortstat` printed (code
//   in the sandbox can print any), and the job re-planned it from the diff's own counts: the
//   body posted was not the one approved, whose sha256 nobody compared again. Both now count the
//   diff's text, and the job refuses a body whose sha256 is not the one approved.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codingRunSpec, type CodingRunStatus, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { countDiff, type KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { decideJobFailure } from '../../operator/src/workers/job-failure.ts';
import { answerPublishApproval, runPublishJob, startPublish } from '../../operator/src/workers/publish-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { createBareRepository, git } from '../support/git-fixture.ts';
import { startGitHttpServer, type GitHttpServer } from '../support/git-http-server.ts';

const TOKEN = 'publish-job-approved-body-token';
const DIFF = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n';

let base: string;
let bare: string;
let server: GitHttpServer;
let forge: { server: Server; origin: string; bodies: string[] };

/** A forge API (Gitea's paths) with main for default branch and no open pull request, which records each body it is asked to open. */
async function startForge(): Promise<typeof forge> {
  const bodies: string[] = [];
  const listening = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    request.on('end', () => {
      response.setHeader('content-type', 'application/json');
      if (request.method === 'POST' && request.url?.endsWith('/pulls')) {
        const asked = JSON.parse(text) as { title: string; body: string };
        bodies.push(asked.body);
        response
          .writeHead(201)
          .end(JSON.stringify({ number: 1, html_url: 'https://forge.example/pulls/1', title: asked.title, body: asked.body }));
      } else if (request.method === 'GET' && request.url?.includes('/pulls?')) response.end('[]');
      else if (request.method === 'GET' && /^\/api\/v1\/repos\/[^/]+\/[^/]+$/.test(request.url ?? ''))
        response.end('{"default_branch":"main"}');
      else response.writeHead(404).end('{"message":"not here"}');
    });
  });
  await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
  return { server: listening, origin: `http://127.0.0.1:${(listening.address() as AddressInfo).port}`, bodies };
}

beforeEach(async () => {
  base = mkdtempSync(join(tmpdir(), 'chamvi-publish-body-'));
  bare = createBareRepository(base).slice('file://'.length);
  server = await startGitHttpServer(join(base, 'git'), TOKEN);
  forge = await startForge();
});
afterEach(async () => {
  await server.close();
  await new Promise((resolve) => forge.server.close(resolve));
  rmSync(base, { recursive: true, force: true });
});

/** Run ns/r, publishing with a pull request after approval, its state as finalize has it, and the workers' dependencies over them. */
function world() {
  const run: ParsedCodingRun = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: 'r', namespace: 'ns', uid: 'uid-1', generation: 1, creationTimestamp: '2026-12-05T00:00:00Z' },
    spec: codingRunSpec.parse({
      task: 'Greet the world',
      repository: { url: `${server.origin}/hello.git`, revision: 'main', credentialsSecretRef: { name: 'git', key: 'token' } },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
      publish: { pullRequest: {} },
      approval: { publish: true },
    }),
    status: { phase: 'Running' },
  };
  const state = {
    uid: 'uid-1',
    namespace: 'ns',
    name: 'r',
    stage: 'finalizing',
    revision: git(['rev-parse', 'main'], bare).trim(),
    step: 3,
    toolCalls: 4,
    usage: { totalTokens: 1234 },
    startedAt: Date.parse('2026-12-05T00:00:00Z'),
  } as unknown as RunState;
  const deps = {
    states: { load: async () => state, save: async () => undefined, delete: async () => undefined },
    getRun: async () => run,
    clonePolicy: { allowRepo: [`${server.origin}/**`], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 1_000 },
    resources: { secretValue: async () => TOKEN, readDiff: async () => ({ diff: DIFF, configMap: 'r-diff' }) },
    publishPolicy: {
      author: { name: 'chamvi test', email: 'chamvi@example.test' },
      forges: [{ host: server.origin.slice('http://'.length), kind: 'gitea', apiURL: `${forge.origin}/api/v1` }],
    },
    status: {
      write: async (
        _namespace: string,
        _name: string,
        _uid: string,
        change: (status: CodingRunStatus, current: ParsedCodingRun) => CodingRunStatus,
      ) => {
        run.status = change(structuredClone(run.status!), run);
        return { written: true, run };
      },
    },
    events: { record: async () => undefined },
    transcript: { append: async () => undefined },
    queue: { publish: async () => undefined },
    sandboxes: { release: async () => undefined },
    metrics: { runsFinished: { inc() {} }, runDuration: { observe() {} } },
    logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
    now: () => new Date('2026-12-05T01:00:00Z'),
  } as unknown as AgentDependencies;
  return { run, state, deps, ref: { uid: 'uid-1', namespace: 'ns', name: 'r' } };
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
    expect(forge.bodies).toHaveLength(1);
    expect(sha256(forge.bodies[0]!)).toBe(bodySha256);
    expect(forge.bodies[0]).toContain('1 files changed, +1 −1');
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
    expect(forge.bodies).toEqual([body]);
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
    expect(forge.bodies).toEqual([]);
    expect(git(['ls-remote', bare, 'refs/heads/chamvi/r'], bare)).toBe('');
  });
});
