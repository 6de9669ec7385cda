// spec.templateRef (#15.3) through the whole product: the operator as a process, the real API
// server, Redis, git and the toolbox in kwok pods, and a model over HTTP that records what it
// was sent. A run that names a CodingRunTemplate runs the template's task, repository and
// model with its own fields laid over them; an edit of the template while the run works does
// not reach it; a template outside allowRepo is refused like a run's own repository; a run
// whose template is missing fails TemplateNotFound saying what to create.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRunStatus } from '../../operator/src/api/index.ts';
import { kubectl } from '../support/cluster.ts';
import { startE2eOperator, type E2eOperator } from '../support/e2e-operator.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, eventsOf, finishedRun, runStatus } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';

const NS = 'e2e-run-template';
const PREFIX = `e2etpl${Date.now()}`;

let root: string;
let repoUrl: string;
let e2e: E2eOperator | undefined;
let fake: FakeOpenAIServer;

const apply = (...objects: object[]) => applyIn(NS, objects);

const finished = (name: string) =>
  finishedRun<CodingRunStatus>(NS, name, 60_000).catch(async (error: unknown) => {
    const problems = e2e!.operator.lines.filter((line) => (line.level ?? 0) >= 40).slice(-10);
    console.error(`${name}: ${JSON.stringify(await runStatus(NS, name))}\n${problems.map((line) => JSON.stringify(line)).join('\n')}`);
    throw error;
  });

const template = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRunTemplate',
  metadata: { name },
  spec,
});

const templatedRun = (name: string, templateName: string, own: Record<string, unknown> = {}) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name },
  spec: { templateRef: { name: templateName }, ...own },
});

const model = (name: string) => ({ provider: 'openai-compatible', name, baseURL: fake.baseURL, apiKeySecretRef: { name: 'llm' } });

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-template-'));
  repoUrl = createBareRepository(root, { 'README.md': 'Hello\n\nA small example repository.\n' });
  fake = await startFakeOpenAIServer();
  e2e = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-run-template',
    redisPrefix: PREFIX,
    allowRepo: `file://${join(root, 'git')}/*`,
    env: { CHAMVI_ALLOW_MODEL_ENDPOINTS: fake.baseURL },
  });
  await apply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
    stringData: { apiKey: 'sk-template-e2e-key-0123456789' },
  });
}, 120_000);

afterAll(async () => {
  await e2e?.stop();
  await fake?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('a CodingRun that names a CodingRunTemplate', () => {
  it("runs the template's task with its own override, and a template edited meanwhile does not reach it", async () => {
    await apply(
      template('greeter', {
        task: 'Greet the world in README.md.',
        repository: { url: repoUrl },
        model: model('templated'),
        tools: { allow: ['read_file', 'edit_file'] },
        budget: { maxSteps: 5, timeout: '5m' },
      }),
    );
    // The first answer takes a while: the test edits the template while the run is at work.
    fake.enqueueFor(
      'templated',
      {
        type: 'tool-calls',
        delayMs: 6_000,
        toolCalls: [{ name: 'edit_file', arguments: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } }],
      },
      { type: 'text', text: 'Greeted the world.' },
    );
    // The run's own field: extra instructions, and the template's everything else.
    await apply(templatedRun('greet', 'greeter', { instructions: 'Sign every change as the template test.' }));
    const recorded = await eventually(
      async () => (await runStatus<CodingRunStatus>(NS, 'greet')).template,
      30_000,
      'the template recorded in status.template',
    );
    expect(recorded).toMatchObject({ name: 'greeter', spec: { task: 'Greet the world in README.md.' } });
    expect(recorded.resourceVersion).toMatch(/^\d+$/);
    // Taking edit_file away (and changing the task) now must not change the accepted run.
    await apply(
      template('greeter', {
        task: 'Delete the README.',
        repository: { url: repoUrl },
        model: model('templated'),
        tools: { allow: ['read_file'] },
      }),
    );
    // A change of the run's metadata makes the operator reconcile it while the first answer is on its way.
    expect((await kubectl(['annotate', 'crun', 'greet', '-n', NS, 'test/touched=after-template-edit'])).code).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 2_000));

    const status = await finished('greet');
    expect(status).toMatchObject({
      phase: 'Succeeded',
      steps: 2,
      template: { name: 'greeter', resourceVersion: recorded.resourceVersion },
    });
    expect(status.result!.diff).toContain('-Hello\n+Hello, world\n');
    const requests = fake.requestsFor('templated');
    expect(requests).toHaveLength(2);
    const first = JSON.stringify(requests[0]!.body);
    expect(first).toContain('Greet the world in README.md.');
    expect(first).toContain('Sign every change as the template test.');
    expect(first).not.toContain('Delete the README.');
    // The second step still offered the accepted run's tools (the tool definitions, not the history).
    const offered = (requests[1]!.body as { tools?: unknown[] }).tools;
    expect(JSON.stringify(offered)).toContain('edit_file');
    expect(await eventsOf(NS, 'involvedObject.name=greet,reason=Accepted', 'jsonpath={.items[*].message}')).toContain(
      `from CodingRunTemplate greeter (resourceVersion ${recorded.resourceVersion})`,
    );
    // Stored as written: what the run's author applied, the template's part in status.template.
    const stored = JSON.parse((await kubectl(['get', 'crun', 'greet', '-n', NS, '-o', 'jsonpath={.spec}'])).stdout);
    expect(stored).toEqual({ templateRef: { name: 'greeter' }, instructions: 'Sign every change as the template test.' });
  });

  it('fails TemplateNotFound, saying what to create, when the template does not exist', async () => {
    await apply(templatedRun('orphan', 'no-such-template', { task: 'Anything.' }));
    const status = await finished('orphan');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'TemplateNotFound' });
    expect(status.message).toContain(`CodingRunTemplate ${NS}/no-such-template named in spec.templateRef does not exist`);
    expect(status.message).toContain("create it in the run's namespace");
    expect(status.conditions?.find((condition) => condition.type === 'Accepted')).toMatchObject({
      status: 'False',
      reason: 'TemplateNotFound',
    });
    expect(await eventsOf(NS, 'involvedObject.name=orphan,reason=TemplateNotFound', 'jsonpath={.items[*].type}')).toBe('Warning');
  });

  it("refuses a template's repository outside allowRepo as it would the run's own: a template is no way around a check", async () => {
    await apply(
      template('elsewhere', {
        task: 'Anything.',
        repository: { url: 'https://github.com/evil/x.git' },
        model: model('never-asked'),
      }),
    );
    await apply(templatedRun('via-template', 'elsewhere'));
    const status = await finished('via-template');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'RepoNotAllowed' });
    expect(fake.requestsFor('never-asked')).toEqual([]);
  });
});
