// The publish job's world in the unit tests: real git and a real git server (smart HTTP, git
// http-backend) holding hello.git, a loopback forge API (Gitea's paths) that records each pull
// request it is asked to open, and in-memory recorders for the job's other dependencies. Each
// test gets a fresh repository and forge; what the job did is read off the recorders.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import { codingRunSpec, type CodingRunStatus, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { diffSha } from '../../operator/src/reconcile/diff-config-map.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { createBareRepository, git } from './git-fixture.ts';
import { startGitHttpServer, type GitHttpServer } from './git-http-server.ts';

/** The push token: the git server serves only requests that send it, and the run's secret holds it. */
const TOKEN = 'publish-job-token';

/** The run's diff as its ConfigMap keeps it: one line of README.md changed. */
export const DIFF = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n';

/** Run ns/r, as a job's queue entry names it. */
export const runRef = { uid: 'uid-1', namespace: 'ns', name: 'r' };

/** When the run started: its creation and its state's startedAt. */
export const STARTED_AT = '2026-12-05T00:00:00Z';

/** A pull request the forge was asked to open. */
export interface AskedPullRequest {
  head: string;
  base: string;
  title: string;
  body: string;
}

export interface RecordingForge {
  /** http://127.0.0.1:PORT */
  origin: string;
  /** The pull requests asked for, in order; each was opened as number 1. */
  opened: AskedPullRequest[];
  close(): Promise<void>;
}

/** A forge API (Gitea's paths): default branch main, no open pull request; each one asked for is opened and recorded. */
export async function startRecordingForge(): Promise<RecordingForge> {
  const opened: AskedPullRequest[] = [];
  const api: Server = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    request.on('end', () => {
      response.setHeader('content-type', 'application/json');
      if (request.method === 'POST' && request.url?.endsWith('/pulls')) {
        const asked = JSON.parse(text) as AskedPullRequest;
        opened.push({ head: asked.head, base: asked.base, title: asked.title, body: asked.body });
        response
          .writeHead(201)
          .end(JSON.stringify({ number: 1, html_url: 'https://forge.example/pulls/1', title: asked.title, body: asked.body }));
      } else if (request.method === 'GET' && request.url?.includes('/pulls?')) response.end('[]');
      // The repository: owner/name, or the one segment of the git server's /hello.git.
      else if (request.method === 'GET' && /^\/api\/v1\/repos\/[^/]+(\/[^/]+)?$/.test(request.url ?? ''))
        response.end('{"default_branch":"main"}');
      else response.writeHead(404).end('{"message":"not here"}');
    });
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(api.address() as AddressInfo).port}`,
    opened,
    close: () => new Promise((resolve) => api.close(() => resolve())),
  };
}

/** One test's remote: the repository, the git server that serves it, the forge in front of it. */
export interface PublishRemote {
  /** The test's temp dir (the bare repository is under it, at git/hello.git). */
  dir: string;
  /** The bare repository's path, as git on this machine reaches it. */
  bare: string;
  server: GitHttpServer;
  forge: RecordingForge;
}

/**
 * Call at a test file's top level: registers the beforeEach that makes a fresh remote (hello.git
 * with README.md on main, served with the push token; a recording forge) and the afterEach that
 * closes and removes it. The object returned is that test's remote.
 */
export function publishRemote(): PublishRemote {
  const remote = {} as PublishRemote;
  beforeEach(async () => {
    remote.dir = mkdtempSync(join(tmpdir(), 'chamvi-publish-job-'));
    remote.bare = createBareRepository(remote.dir).slice('file://'.length);
    remote.server = await startGitHttpServer(join(remote.dir, 'git'), TOKEN);
    remote.forge = await startRecordingForge();
  });
  afterEach(async () => {
    await remote.server.close();
    await remote.forge.close();
    rmSync(remote.dir, { recursive: true, force: true });
  });
  return remote;
}

/** The full commit `revision` names in the remote's repository. */
export function commitOf(remote: PublishRemote, revision: string): string {
  return git(['rev-parse', `${revision}^{commit}`], remote.bare).trim();
}

/** The remote's line for branch `branch` (its commit and ref), or '' when the remote has no such branch. */
export function branchOnRemote(remote: PublishRemote, branch: string): string {
  return git(['ls-remote', remote.bare, `refs/heads/${branch}`], remote.bare).trim();
}

export interface PublishingRunOptions {
  /** spec.repository.revision; main unless said. */
  revision?: string;
  /** spec.publish; branch chamvi/r with a pull request unless said. */
  publish?: object;
  /** spec.approval, if any. */
  approval?: object;
  /** Over the run's own metadata (annotations, a deletionTimestamp). */
  metadata?: Partial<ParsedCodingRun['metadata']>;
  /** Running with its summary written, unless said. */
  status?: CodingRunStatus;
}

/** Run ns/r of the remote's hello.git, its spec parsed as the operator has it. */
export function publishingRun(remote: PublishRemote, options: PublishingRunOptions = {}): ParsedCodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { ...runRef, generation: 1, creationTimestamp: STARTED_AT, ...options.metadata },
    spec: codingRunSpec.parse({
      task: 'Greet the world',
      repository: {
        url: `${remote.server.origin}/hello.git`,
        revision: options.revision ?? 'main',
        credentialsSecretRef: { name: 'git', key: 'token' },
      },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
      publish: options.publish ?? { branch: 'chamvi/r', pullRequest: {} },
      ...(options.approval !== undefined ? { approval: options.approval } : {}),
    }),
    // Of the result the finalize job wrote, the publish job reads only the summary.
    status: options.status ?? ({ phase: 'Running', result: { summary: 'Greeted the world.' } } as CodingRunStatus),
  };
}

/** The run's state as the finalize job leaves it for the publish job (the diff's sha256 kept), cloned at `revision`; `fields` over it. */
export function publishingState(remote: PublishRemote, revision = 'main', fields: Partial<RunState> = {}): RunState {
  return {
    ...runRef,
    stage: 'publishing',
    publish: { diffSha256: diffSha(DIFF) },
    revision: commitOf(remote, revision),
    step: 1,
    usage: { totalTokens: 0 },
    startedAt: Date.parse(STARTED_AT),
    ...fields,
  } as unknown as RunState;
}

/** What the job did, as its recorders saw it. */
export interface PublishJobRecord {
  /** Each status the job computed, in order; the last one is the run's. */
  statuses: CodingRunStatus[];
  /** The messages of the Events it recorded. */
  events: string[];
  tokensRead: number;
  diffsRead: number;
  statesDeleted: number;
}

/**
 * The workers' dependencies over `run` and `state`: getRun reads `run`; its fresh reads (before
 * the push, before the pull request, after a stop) read `fresh` in turn, the last one again, or
 * `run` when no `fresh` is given. A status written is the run's from then on, as the API server
 * would have it.
 */
export function publishJobDependencies(remote: PublishRemote, run: ParsedCodingRun, state: RunState, fresh?: ParsedCodingRun[]) {
  const done: PublishJobRecord = { statuses: [], events: [], tokensRead: 0, diffsRead: 0, statesDeleted: 0 };
  let reads = 0;
  const deps = {
    states: { load: async () => state, save: async () => undefined, delete: async () => void done.statesDeleted++ },
    getRun: async () => run,
    getRunFresh: fresh ? async () => fresh[Math.min(reads++, fresh.length - 1)] : undefined,
    clonePolicy: { allowRepo: [`${remote.server.origin}/**`], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 1_000 },
    resources: {
      secretValue: async () => (done.tokensRead++, TOKEN),
      readDiff: async () => (done.diffsRead++, { diff: DIFF, configMap: 'r-diff' }),
    },
    publishPolicy: {
      author: { name: 'chamvi test', email: 'chamvi@example.test' },
      forges: [{ host: remote.server.origin.slice('http://'.length), kind: 'gitea', apiURL: `${remote.forge.origin}/api/v1` }],
    },
    status: {
      write: async (
        _namespace: string,
        _name: string,
        _uid: string,
        change: (status: CodingRunStatus, current: ParsedCodingRun) => CodingRunStatus,
      ) => {
        run.status = change(structuredClone(run.status!), run);
        done.statuses.push(run.status);
        return { written: true, run };
      },
    },
    events: { record: async (_run: unknown, event: { message: string }) => void done.events.push(event.message) },
    transcript: { append: async () => undefined },
    queue: { publish: async () => undefined },
    sandboxes: { release: async () => undefined },
    metrics: { runsFinished: { inc() {} }, runDuration: { observe() {} } },
    logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
    now: () => new Date('2026-12-05T01:00:00Z'),
  } as unknown as AgentDependencies;
  return { deps, done };
}
