// The whole product on the local control plane: the operator as a process, real Redis,
// real exec into kwok pods running the real toolbox, real git. A run clones a repository,
// calls a model (the scripted one, or the real openai-compatible adapter against a fake
// server over HTTP), runs its tools in the sandbox and ends with its diff.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { APPROVAL_ANNOTATION, encodeApprovalAnnotation } from '../../operator/src/reconcile/approval-answer.ts';
import { diffConfigMapName, sandboxPodName } from '../../operator/src/reconcile/names.ts';
import { createNamespace, kubeconfigPath, kubectl, redisUrl } from '../support/cluster.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import { createBareRepository, createRepository, git } from '../support/git-fixture.ts';
import { applyIn, eventsOf, finishedRun, runStatus } from '../support/namespaced-runs.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import { startSandboxExecRegistrar, type SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import type { RunStatus } from '../support/fault-fixture.ts';

const NS = 'e2e-agent';
const PREFIX = `e2e${Date.now()}`;
const API_KEY = 'sk-planted-e2e-key-0123456789abcdef';
const toolbox = new URL('../../sandbox-image/dist/toolbox.mjs', import.meta.url).pathname;

let root: string;
let repoUrl: string;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;
let fake: FakeOpenAIServer;

const apply = (...objects: object[]) => applyIn(NS, objects);
const statusOf = (name: string) => runStatus<RunStatus>(NS, name);

const finished = (name: string, timeoutMs = 60_000) =>
  finishedRun<RunStatus>(NS, name, timeoutMs).catch(async (error: unknown) => {
    // What a reader of a failed CI run needs: where the run stood and what the operator said.
    const problems = operator.lines.filter((line) => (line.level ?? 0) >= 40).slice(-10);
    console.error(`${name}: ${JSON.stringify(await statusOf(name))}\n${problems.map((line) => JSON.stringify(line)).join('\n')}`);
    throw error;
  });

const script = (name: string, turns: object[]) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data: { 'script.json': JSON.stringify({ turns }) },
});

function codingRun(name: string, model: object, spec: object = {}) {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: { task: 'Make the README greet the whole world.', repository: { url: repoUrl }, model, ...spec },
  };
}

function operatorEnv(): Record<string, string> {
  return {
    REDIS_URL: redisUrl(),
    CHAMVI_REDIS_PREFIX: PREFIX,
    CHAMVI_ALLOW_REPO: `file://${join(root, 'git')}/*`,
    CHAMVI_TOOLBOX_COMMAND: `${process.execPath} ${toolbox}`,
    // Security #11.3: the fake model is the only endpoint a run may name (started before any operator).
    CHAMVI_ALLOW_MODEL_ENDPOINTS: fake.baseURL,
  };
}

const READ = { toolName: 'read_file', input: { path: 'README.md' } };
const EDIT = { toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } };
const BASH = { toolName: 'bash', input: { command: 'git diff --stat' } };

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-'));
  repoUrl = createBareRepository(root, { 'README.md': 'Hello\n\nA small example repository.\n' });

  await createNamespace(NS, { restricted: true });
  await createNamespace(`${NS}-lease`);
  registrar = await startSandboxExecRegistrar({ kubeconfig: kubeconfigPath(), rootDir: join(root, 'workspaces') });
  fake = await startFakeOpenAIServer();
  await apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
    stringData: { apiKey: API_KEY },
  });
  operator = new OperatorProcess({
    kubeconfig: kubeconfigPath(),
    env: {
      ...operatorEnv(),
      CHAMVI_WATCH_NAMESPACES: NS,
      CHAMVI_LEADER_ELECTION_NAMESPACE: `${NS}-lease`,
      CHAMVI_IDENTITY: 'e2e-agent',
    },
  });
  await operator.waitForLog('caches synced; reconciling');
}, 120_000);

afterAll(async () => {
  await operator?.kill();
  await registrar?.stop();
  await fake?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('a scripted run', () => {
  it('reads, edits, runs bash and answers: Succeeded with its diff, usage and counts', async () => {
    await apply(
      script('hello-script', [
        { toolCalls: [READ], usage: { inputTokens: 1200, outputTokens: 40 } },
        { toolCalls: [EDIT], usage: { inputTokens: 1500, outputTokens: 60, cacheReadTokens: 1000 } },
        { toolCalls: [BASH], usage: { inputTokens: 1600, outputTokens: 20 } },
        { text: 'Greeted the world in the README.', usage: { inputTokens: 1700, outputTokens: 12 } },
      ]),
      codingRun('scripted', { provider: 'scripted', scriptRef: { name: 'hello-script' } }),
    );
    const status = await finished('scripted');
    expect(status).toMatchObject({ phase: 'Succeeded', reason: 'Completed', steps: 4, toolCalls: 3 });
    expect(status.usage).toEqual({
      inputTokens: 6000,
      outputTokens: 132,
      cacheReadTokens: 1000,
      reasoningTokens: 0,
      totalTokens: 6132,
      complete: true,
    });
    const uid = (await kubectl(['get', 'crun', 'scripted', '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
    const scripted = { metadata: { name: 'scripted', uid } };
    expect(status.result).toMatchObject({
      summary: 'Greeted the world in the README.',
      filesChanged: 1,
      insertions: 1,
      deletions: 1,
      diffTruncated: false,
      diffConfigMap: diffConfigMapName(scripted),
    });
    expect(status.result!.diff).toContain('-Hello\n+Hello, world\n');
    const configMap = await kubectl(['get', 'configmap', diffConfigMapName(scripted), '-n', NS, '-o', 'jsonpath={.data.diff}']);
    expect(configMap.stdout).toBe(status.result!.diff);
    const table = await kubectl(['get', 'crun', 'scripted', '-n', NS]);
    expect(table.stdout).toMatch(/scripted\s+Succeeded\s+4\s+6132\s+/);
    await eventually(
      async () => ((await kubectl(['get', 'pod', sandboxPodName(scripted), '-n', NS])).code !== 0 ? true : undefined),
      20_000,
      'the sandbox pod to go',
    );
  });

  it('stops at maxSteps with BudgetExceeded and keeps the partial diff', async () => {
    await apply(
      script('long-script', [
        { toolCalls: [READ], usage: { inputTokens: 10, outputTokens: 1 } },
        { toolCalls: [EDIT], usage: { inputTokens: 10, outputTokens: 1 } },
        { toolCalls: [BASH], usage: { inputTokens: 10, outputTokens: 1 } },
        { text: 'never reached' },
      ]),
      codingRun('budget', { provider: 'scripted', scriptRef: { name: 'long-script' } }, { budget: { maxSteps: 2 } }),
    );
    const status = await finished('budget');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'BudgetExceeded', steps: 2 });
    expect(status.result!.diff).toContain('+Hello, world');
  });

  it('runs spec.sandbox.setup in the workspace before the first step', async () => {
    await apply(
      script('setup-script', [
        { toolCalls: [{ toolName: 'read_file', input: { path: 'setup.txt' } }], usage: { inputTokens: 10, outputTokens: 1 } },
        {
          toolCalls: [{ toolName: 'write_file', input: { path: 'copied.txt', content: 'setup ran\n' } }],
          usage: { inputTokens: 10, outputTokens: 1 },
        },
        { text: 'done', usage: { inputTokens: 10, outputTokens: 1 } },
      ]),
      codingRun(
        'setup',
        { provider: 'scripted', scriptRef: { name: 'setup-script' } },
        { sandbox: { setup: 'echo "made by setup" > setup.txt' } },
      ),
    );
    const status = await finished('setup');
    expect(status).toMatchObject({ phase: 'Succeeded', steps: 3 });
    expect(status.result!.diff).toContain('+made by setup');
    expect(await eventsOf(NS, 'involvedObject.name=setup,reason=SetupDone')).not.toBe('');
  });

  it('ends with SetupFailed and the setup output when setup fails', async () => {
    await apply(
      script('short', [{ text: 'done' }]),
      codingRun(
        'setup-fails',
        { provider: 'scripted', scriptRef: { name: 'short' } },
        { sandbox: { setup: 'echo "npm ERR! missing script: ci"; exit 3' } },
      ),
    );
    const status = await finished('setup-fails');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'SetupFailed' });
    expect(status.message).toContain('exited with 3');
    expect(status.message).toContain('npm ERR! missing script: ci');
  });

  it('ends with CloneFailed and the git message when the repository does not exist', async () => {
    await apply(
      script('short', [{ text: 'done' }]),
      codingRun(
        'no-repo',
        { provider: 'scripted', scriptRef: { name: 'short' } },
        { repository: { url: repoUrl.replace('hello.git', 'missing.git') } },
      ),
    );
    const status = await finished('no-repo');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'CloneFailed' });
    expect(status.message).toMatch(/does not appear to be a git repository|not found/);
  });
});

describe('approvals', () => {
  it('waits for approval, resumes on approve, and the run succeeds', async () => {
    await apply(
      script('approve-script', [
        { toolCalls: [EDIT], usage: { inputTokens: 10, outputTokens: 1 } },
        { toolCalls: [BASH], usage: { inputTokens: 10, outputTokens: 1 } },
        { text: 'done', usage: { inputTokens: 10, outputTokens: 1 } },
      ]),
      codingRun('approve', { provider: 'scripted', scriptRef: { name: 'approve-script' } }, { approval: { tools: ['bash'] } }),
    );
    const waiting = await eventually(
      async () => {
        const status = await statusOf('approve');
        return status.phase === 'WaitingForApproval' ? status : undefined;
      },
      60_000,
      'approve to wait',
    );
    expect(waiting.pendingApproval).toMatchObject({ toolName: 'bash', input: '{"command":"git diff --stat"}' });
    // Security #11.5: an approval names the sha256 of the input it approves.
    const sha256 = createHash('sha256').update(waiting.pendingApproval!.input, 'utf8').digest('hex');
    const answer = encodeApprovalAnnotation({ id: waiting.pendingApproval!.id, decision: 'approve', sha256 });
    expect((await kubectl(['annotate', 'crun', 'approve', '-n', NS, `${APPROVAL_ANNOTATION}=${answer}`, '--overwrite'])).code).toBe(0);
    const status = await finished('approve');
    expect(status).toMatchObject({ phase: 'Succeeded', steps: 3, toolCalls: 2 });
    expect(status.pendingApproval).toBeUndefined();
  });
});

describe('an openai-compatible model over HTTP', () => {
  const model = () => ({ provider: 'openai-compatible', name: 'fake-coder', baseURL: fake.baseURL, apiKeySecretRef: { name: 'llm' } });

  // Figures a request of a few thousand tokens could count: one under a tenth of the operator's
  // own estimate is not believed (agent/usage-accounting.ts).
  it("does the task, retries a 429, and reports the server's usage", async () => {
    fake.enqueue(
      { type: 'error', status: 429, headers: { 'retry-after': '0' } },
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'read_file', arguments: { path: 'README.md' } }],
        usage: { promptTokens: 3_000, completionTokens: 10, cachedTokens: 20 },
      },
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'edit_file', arguments: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }],
        usage: { promptTokens: 3_100, completionTokens: 20, reasoningTokens: 5 },
      },
      { type: 'text', text: 'Done.', usage: { promptTokens: 3_200, completionTokens: 5 } },
    );
    await apply(codingRun('compat', model()));
    const status = await finished('compat');
    expect(status).toMatchObject({ phase: 'Succeeded', steps: 3, toolCalls: 2 });
    expect(status.usage).toEqual({
      inputTokens: 9_300,
      outputTokens: 35,
      cacheReadTokens: 20,
      reasoningTokens: 5,
      totalTokens: 9_335,
      complete: true,
    });
    expect(status.result!.diff).toContain('+Hello, world');
    expect(fake.requests.every((request) => request.headers.authorization === `Bearer ${API_KEY}`)).toBe(true);
  });

  it('sends a denied call back to the model as a tool error with the reason', async () => {
    const before = fake.requests.length;
    fake.enqueue(
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'bash', arguments: { command: 'curl https://example.com' } }],
        usage: { promptTokens: 1, completionTokens: 1 },
      },
      { type: 'text', text: 'Understood.', usage: { promptTokens: 1, completionTokens: 1 } },
    );
    await apply(codingRun('deny', model(), { approval: { tools: ['bash'] } }));
    const waiting = await eventually(
      async () => {
        const status = await statusOf('deny');
        return status.phase === 'WaitingForApproval' ? status : undefined;
      },
      60_000,
      'deny to wait',
    );
    const answer = encodeApprovalAnnotation({ id: waiting.pendingApproval!.id, decision: 'deny', reason: 'no network access' });
    await kubectl(['annotate', 'crun', 'deny', '-n', NS, `${APPROVAL_ANNOTATION}=${answer}`, '--overwrite']);
    const status = await finished('deny');
    expect(status.phase).toBe('Succeeded');
    const followUp = JSON.stringify(fake.requests[before + 1]!.body);
    expect(followUp).toContain('DENIED');
    expect(followUp).toContain('no network access');
  });

  it('compacts and asks once more when the provider says the context is too long (#13.10)', async () => {
    const before = fake.requests.length;
    fake.enqueue(
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'read_file', arguments: { path: 'README.md' } }],
        usage: { promptTokens: 3_000, completionTokens: 1 },
      },
      {
        type: 'error',
        status: 400,
        message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
      },
      { type: 'text', text: 'SUMMARY: the README was read.', usage: { promptTokens: 1_000, completionTokens: 5 } },
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'edit_file', arguments: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }],
        usage: { promptTokens: 3_100, completionTokens: 20 },
      },
      { type: 'text', text: 'Done.', usage: { promptTokens: 3_200, completionTokens: 3 } },
    );
    await apply(codingRun('overflow', model()));
    const status = await finished('overflow');
    expect(status).toMatchObject({ phase: 'Succeeded', steps: 3, toolCalls: 2 });
    expect(status.result!.diff).toContain('+Hello, world');
    expect(status.usage).toMatchObject({ inputTokens: 10_300, outputTokens: 29, complete: true });
    const bodies = fake.requests.slice(before).map((request) => JSON.stringify(request.body));
    expect(bodies).toHaveLength(5);
    expect(bodies[2]).toContain('You compress the earlier part');
    expect(bodies[3]).toContain('SUMMARY: the README was read.');
  });

  it('counts the tool definitions in the context estimate, so a small window compacts in time (#13.10)', async () => {
    // About 400 tokens of system prompt and 2 400 of tool definitions: past the 2 400 threshold of a
    // 3 200-token window only when the definitions are counted.
    const before = fake.requests.length;
    fake.enqueue(
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'read_file', arguments: { path: 'README.md' } }],
        usage: { promptTokens: 1, completionTokens: 1 },
      },
      { type: 'text', text: 'SUMMARY: the README was read.', usage: { promptTokens: 1, completionTokens: 1 } },
      { type: 'text', text: 'Done.', usage: { promptTokens: 1, completionTokens: 1 } },
    );
    await apply(codingRun('schemas', { ...model(), contextWindow: 3_200 }));
    expect(await finished('schemas')).toMatchObject({ phase: 'Succeeded', steps: 2 });
    const bodies = fake.requests.slice(before).map((request) => JSON.stringify(request.body));
    expect(bodies).toHaveLength(3);
    expect(bodies[1]).toContain('You compress the earlier part');
  });

  it('fails ModelRequestRejected when the context is still too long after compacting once', async () => {
    const before = fake.requests.length;
    const tooLong = { type: 'error' as const, status: 400, message: 'prompt is too long: 210000 tokens > 200000 maximum' };
    fake.enqueue(
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'read_file', arguments: { path: 'README.md' } }],
        usage: { promptTokens: 1, completionTokens: 1 },
      },
      tooLong,
      { type: 'text', text: 'SUMMARY: read.', usage: { promptTokens: 1, completionTokens: 1 } },
      tooLong,
    );
    await apply(codingRun('overflow-twice', model()));
    const status = await finished('overflow-twice');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'ModelRequestRejected' });
    expect(status.message).toContain('prompt is too long');
    expect(fake.requests.length - before).toBe(4);
  });

  it("puts the repository's AGENTS.md and CLAUDE.md in the first prompt, unless spec.repositoryInstructions is false (#13.8)", async () => {
    const source = join(root, 'guided-source');
    createRepository(source, {
      'README.md': 'Hello\n',
      'AGENTS.md': 'Run `make check` before you finish.\n@docs/style.md\n',
      'docs/style.md': 'Tabs, never spaces.\n',
      'CLAUDE.md': 'Keep commits small.\n',
    });
    git(['clone', '-q', '--bare', source, join(root, 'git', 'guided.git')], root);
    const guidedUrl = `file://${join(root, 'git', 'guided.git')}`;
    const firstBody = async (name: string, spec: object) => {
      const before = fake.requests.length;
      fake.enqueue({ type: 'text', text: 'Nothing to do.', usage: { promptTokens: 1, completionTokens: 1 } });
      await apply({ ...codingRun(name, model(), spec), spec: { ...codingRun(name, model(), spec).spec, repository: { url: guidedUrl } } });
      expect((await finished(name)).phase).toBe('Succeeded');
      return JSON.stringify(fake.requests[before]!.body);
    };
    const guided = await firstBody('guided', {});
    for (const text of ['Run `make check` before you finish.', 'Tabs, never spaces.', 'Keep commits small.'])
      expect(guided).toContain(text);
    expect(guided).toMatch(/<repository-file-[0-9a-f]{32} path=\\"AGENTS\.md\\"/);
    // Root-first, AGENTS.md (with its include) before CLAUDE.md.
    expect(guided.indexOf('Tabs, never spaces.')).toBeLessThan(guided.indexOf('Keep commits small.'));
    const unguided = await firstBody('unguided', { repositoryInstructions: false });
    expect(unguided).not.toContain('make check');
    expect(unguided).not.toContain('Repository guidance');
  });

  describe('an image read_file returns (#13.7)', () => {
    // A 1×1 PNG, written by bash in the sandbox so the shared fixture repository stays text.
    const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
    type ChatMessage = { role: string; content: unknown };

    /** The requests after the read: the next one (answering it) and the one after a further step. */
    async function imageReadRequests(run: string, name: string): Promise<Array<{ messages: ChatMessage[] }>> {
      const before = fake.requests.length;
      fake.enqueue(
        {
          type: 'tool-calls',
          toolCalls: [{ name: 'bash', arguments: { command: `echo ${PIXEL} | base64 -d > pixel.png` } }],
          usage: { promptTokens: 1, completionTokens: 1 },
        },
        {
          type: 'tool-calls',
          toolCalls: [{ name: 'read_file', arguments: { path: 'pixel.png' } }],
          usage: { promptTokens: 1, completionTokens: 1 },
        },
        {
          type: 'tool-calls',
          toolCalls: [{ name: 'bash', arguments: { command: 'true' } }],
          usage: { promptTokens: 1, completionTokens: 1 },
        },
        { type: 'text', text: 'A single pixel.', usage: { promptTokens: 1, completionTokens: 1 } },
      );
      await apply(codingRun(run, { ...model(), name }));
      expect((await finished(run)).phase).toBe('Succeeded');
      return [fake.requests[before + 2]!.body, fake.requests[before + 3]!.body] as Array<{ messages: ChatMessage[] }>;
    }
    const last = (body: { messages: ChatMessage[] }) => body.messages[body.messages.length - 1]!;

    it('reaches a model that accepts images as an image_url part of the tool message, once', async () => {
      const [answering, later] = await imageReadRequests('image-shown', 'gpt-5.6');
      expect(last(answering!).role).toBe('tool');
      expect(last(answering!).content).toEqual([
        { type: 'text', text: '[image image/png, 70 bytes, 1×1 px, pixel.png: shown below]' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${PIXEL}` } },
      ]);
      // Only the newest tool message keeps its images, so the saved conversation stays bounded.
      expect(JSON.stringify(later)).not.toContain('image_url');
      expect(later!.messages).toContainEqual(
        expect.objectContaining({
          role: 'tool',
          content: '[image image/png, 70 bytes, 1×1 px, pixel.png: no longer shown; read the file again to look at it]',
        }),
      );
    });

    it('reaches a model that does not as a short text without the bytes', async () => {
      const [answering] = await imageReadRequests('image-described', 'fake-coder');
      expect(last(answering!)).toMatchObject({
        role: 'tool',
        content: '[image image/png, 70 bytes, 1×1 px, pixel.png: not shown: this model does not accept images]',
      });
    });
  });

  it('ends with ModelAuthFailed at once on 401', async () => {
    const before = fake.requests.length;
    fake.enqueue({ type: 'error', status: 401, message: 'invalid api key' });
    await apply(codingRun('unauthorized', model()));
    const status = await finished('unauthorized');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'ModelAuthFailed' });
    expect(fake.requests.length - before).toBe(1);
  });

  it('never puts the API key in logs, job data or Redis state', async () => {
    const logs = operator.lines.map((line) => JSON.stringify(line)).join('\n') + operator.stderr.join('');
    expect(logs).not.toContain(API_KEY);
    const redis = new Redis(redisUrl());
    try {
      const keys = await redis.keys(`${PREFIX}:*`);
      expect(keys.length).toBeGreaterThan(0);
      for (const key of keys) {
        const type = await redis.type(key);
        const dump =
          type === 'string'
            ? await redis.get(key)
            : type === 'hash'
              ? JSON.stringify(await redis.hgetall(key))
              : type === 'list'
                ? JSON.stringify(await redis.lrange(key, 0, -1))
                : type === 'zset'
                  ? JSON.stringify(await redis.zrange(key, '0', '-1'))
                  : type === 'set'
                    ? JSON.stringify(await redis.smembers(key))
                    : '';
        expect(dump ?? '', key).not.toContain(API_KEY);
      }
    } finally {
      redis.disconnect();
    }
  });
});

describe('observability', () => {
  it('serves /metrics with non-zero counters for runs, steps, tool calls and tokens', async () => {
    const port = (await operator.waitForLog('operator starting')).port as number;
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const value = (pattern: RegExp) =>
      text
        .split('\n')
        .filter((line) => pattern.test(line))
        .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
    expect(value(/^chamvi_runs_finished_total\{.*phase="Succeeded"/)).toBeGreaterThan(0);
    expect(value(/^chamvi_runs\{.*phase="Succeeded"/)).toBeGreaterThan(0);
    expect(value(/^chamvi_steps_total\{provider="scripted"\}/)).toBeGreaterThan(0);
    expect(value(/^chamvi_tool_calls_total\{tool="edit_file",outcome="ok"\}/)).toBeGreaterThan(0);
    expect(value(/^chamvi_tool_calls_total\{tool="bash",outcome="denied"\}/)).toBeGreaterThan(0);
    // Under the run's namespace (#13): the counters add up to the runs' status.usage per namespace.
    expect(value(new RegExp(`^chamvi_tokens_total\\{direction="input",namespace="${NS}",provider="openai-compatible"`))).toBeGreaterThan(0);
    expect(value(/^chamvi_model_call_errors_total\{provider="openai-compatible",reason="ModelAuthFailed"\}/)).toBe(1);
    expect(value(/^chamvi_reconcile_duration_seconds_count/)).toBeGreaterThan(0);
    // Queue depth, read from Redis at each scrape: one series per job state.
    const queueStates = text.split('\n').flatMap((line) => /^chamvi_queue_jobs\{state="(\w+)"\} \d+$/.exec(line)?.[1] ?? []);
    expect(queueStates.sort()).toEqual(['active', 'completed', 'delayed', 'failed', 'prioritized', 'waiting']);
    expect(text).toContain('# TYPE chamvi_exec_errors_total counter');
    expect(text).toContain('chamvi_operator_process_resident_memory_bytes');
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status).toBe(200);
  });

  it('names the run (namespace, name, uid) and the step on every log line about a run', async () => {
    const uid = (await kubectl(['get', 'crun', 'scripted', '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
    const ofRun = operator.lines.filter((line) => line.uid === uid);
    expect(ofRun.every((line) => line.namespace === NS && line.name === 'scripted')).toBe(true);
    // The controller's lines and each of the run's four steps, from the worker.
    expect(ofRun.some((line) => line.msg === 'applied actions')).toBe(true);
    expect(ofRun.filter((line) => line.msg === 'step done').map((line) => line.step)).toEqual([1, 2, 3, 4]);
    // Lines that are about some run always say which one.
    const aboutRuns = operator.lines.filter(
      (line) => ['applied actions', 'status written', 'step done', 'agent job failed'].includes(line.msg ?? '') || line.job !== undefined,
    );
    expect(aboutRuns.length).toBeGreaterThan(0);
    for (const line of aboutRuns)
      expect(line, JSON.stringify(line)).toMatchObject({
        namespace: expect.any(String),
        name: expect.any(String),
        uid: expect.any(String),
      });
  });
});

describe('a worker that dies mid-step', () => {
  it('has its step redone by another worker, and the run succeeds with one consistent transcript', async () => {
    const before = fake.requests.length;
    const model = { provider: 'openai-compatible', name: 'fake-coder', baseURL: fake.baseURL, apiKeySecretRef: { name: 'llm' } };
    const edit = {
      type: 'tool-calls' as const,
      toolCalls: [{ name: 'edit_file', arguments: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }],
      usage: { promptTokens: 20, completionTokens: 2 },
    };
    fake.enqueue(
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'read_file', arguments: { path: 'README.md' } }],
        usage: { promptTokens: 10, completionTokens: 1 },
      },
      // The first answer to step 2 comes too late: its worker is killed while it waits.
      { ...edit, delayMs: 8_000 },
      edit,
      { type: 'text', text: 'Done.', usage: { promptTokens: 30, completionTokens: 3 } },
    );
    // Only a second, short-lock replica may take over: the first one runs alone until killed.
    const common = { ...operatorEnv(), CHAMVI_REDIS_PREFIX: `${PREFIX}kill`, CHAMVI_JOB_LOCK_SECONDS: '3' };
    const first = new OperatorProcess({
      kubeconfig: kubeconfigPath(),
      env: {
        ...common,
        CHAMVI_IDENTITY: 'e2e-worker-a',
        CHAMVI_WATCH_NAMESPACES: `${NS}-kill`,
        CHAMVI_LEADER_ELECTION_NAMESPACE: `${NS}-kill-lease`,
      },
    });
    let second: OperatorProcess | undefined;
    try {
      await createNamespace(`${NS}-kill`, { restricted: true });
      await createNamespace(`${NS}-kill-lease`);
      await kubectl(['apply', '-n', `${NS}-kill`, '-f', '-'], {
        input: stringify({
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
          stringData: { apiKey: API_KEY },
        }),
      });
      await first.waitForLog('caches synced; reconciling');
      const run = codingRun('killed', model);
      await kubectl(['apply', '-n', `${NS}-kill`, '-f', '-'], { input: stringify(run) });
      await eventually(async () => (fake.requests.length >= before + 2 ? true : undefined), 60_000, 'step 2 to call the model');
      // Killed while step 2 waits on its delayed answer, before a second replica exists: on a
      // loaded machine a replica started first could take longer than the delay, and the
      // first worker would finish step 2 itself.
      await first.kill('SIGKILL');
      second = new OperatorProcess({
        kubeconfig: kubeconfigPath(),
        env: {
          ...common,
          CHAMVI_IDENTITY: 'e2e-worker-b',
          CHAMVI_WATCH_NAMESPACES: `${NS}-kill`,
          CHAMVI_LEADER_ELECTION_NAMESPACE: `${NS}-kill-lease`,
        },
      });
      await second.waitForLog('operator starting');
      const status = await eventually(
        async () => {
          const result = await kubectl(['get', 'crun', 'killed', '-n', `${NS}-kill`, '-o', 'jsonpath={.status}']);
          const parsed = result.stdout ? (JSON.parse(result.stdout) as RunStatus) : {};
          return parsed.phase === 'Succeeded' || parsed.phase === 'Failed' ? parsed : undefined;
        },
        90_000,
        'the run to finish after the kill',
      );
      expect(status).toMatchObject({ phase: 'Succeeded', steps: 3, toolCalls: 2 });
      expect(status.result!.diff).toContain('+Hello, world');
      // The last request carries the whole transcript: each step's assistant turn once.
      const last = fake.requests[fake.requests.length - 1]!.body as { messages: Array<{ role: string; tool_calls?: unknown[] }> };
      const assistantTurns = last.messages.filter((message) => message.role === 'assistant');
      expect(assistantTurns).toHaveLength(2);
      expect(last.messages.filter((message) => message.role === 'tool')).toHaveLength(2);
    } finally {
      await first.kill('SIGKILL');
      await second?.kill();
    }
  }, 180_000);
});
