// Hostile models (TESTING.md "Reliability tests"): a model endpoint that accepts the request
// and never answers, one that answers 500 forever, and ones that answer garbage. Each run
// must end Failed with a reason that names its own trouble, no run may outlive its
// budget.timeout, and a stuck model call must hold one worker slot, never the worker.
//
// The operator runs with two worker slots (CHAMVI_WORKER_CONCURRENCY=2), so "free" is
// observable: with one slot stuck another run still goes through, and with both stuck the
// next run waits only until the first stuck one reaches its deadline. It runs with a short
// per-call model timeout (CHAMVI_MODEL_CALL_TIMEOUT_SECONDS) so a hang that the budget does
// not cut is cut by the call timeout, and with a long controller grace so a deadline can
// only be enforced by the worker itself, which is what is under test.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import { eventually } from '../support/operator-process.ts';
import { codingRun, scriptConfigMap, type RunStatus } from '../support/fault-fixture.ts';
import { FaultScene } from '../support/fault-scene.ts';

const NS = 'faults-hostile';
const API_KEY = 'sk-hostile-0123456789abcdef';
const MODEL_CALL_TIMEOUT_SECONDS = 4;

let scene: FaultScene;
let fake: FakeOpenAIServer;
let repoUrl: string;

/** A run against the fake server; the model name picks the fake's behaviour. */
const hostileRun = (name: string, model: string, spec: object = {}) =>
  codingRun(name, repoUrl, { provider: 'openai-compatible', name: model, baseURL: fake.baseURL, apiKeySecretRef: { name: 'llm' } }, spec);

const scriptedRun = (name: string) => codingRun(name, repoUrl, { provider: 'scripted', scriptRef: { name: 'quick' } });

const secondsBetween = (status: RunStatus) => (Date.parse(status.completionTime!) - Date.parse(status.startTime!)) / 1000;

/** What each hostile run told its user, printed once at the end for the CI log. */
const outcomes: string[] = [];
const finished = async (name: string, timeoutMs?: number) => {
  const status = await scene.finished(name, timeoutMs);
  outcomes.push(`${name}: ${status.phase}/${status.reason} after ${secondsBetween(status).toFixed(0)} s: ${status.message}`);
  return status;
};

const requestArrived = (model: string, count = 1) =>
  eventually(async () => (fake.requestsFor(model).length >= count ? true : undefined), 90_000, `${count} request(s) for model ${model}`);

beforeAll(async () => {
  fake = await startFakeOpenAIServer();
  fake.serveForever('hang', { type: 'hang' });
  fake.serveForever('hang-long', { type: 'hang' });
  fake.serveForever('error-500', { type: 'error', status: 500, message: 'upstream exploded' });
  fake.serveForever('invalid-json', { type: 'raw', body: '{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assis' });
  fake.serveForever('wrong-shape', { type: 'raw', body: JSON.stringify({ status: 'ok', data: [1, 2, 3] }) });
  fake.serveForever('html-page', {
    type: 'raw',
    contentType: 'text/html',
    body: '<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>',
  });
  fake.serveForever('malformed-tool-calls', {
    type: 'tool-calls',
    toolCalls: [{ name: 'read_file', arguments: '{"path": "README.md", ' }],
    usage: { promptTokens: 10, completionTokens: 5 },
  });
  scene = await FaultScene.start({
    namespace: NS,
    env: {
      CHAMVI_WORKER_CONCURRENCY: '2',
      CHAMVI_MODEL_CALL_TIMEOUT_SECONDS: String(MODEL_CALL_TIMEOUT_SECONDS),
      CHAMVI_DEADLINE_GRACE_SECONDS: '600',
      CHAMVI_ALLOW_MODEL_ENDPOINTS: fake.baseURL,
    },
  });
  repoUrl = scene.repoUrl;
  await scene.ns.apply(
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
      stringData: { apiKey: API_KEY },
    },
    scriptConfigMap('quick', [
      { toolCalls: [{ toolName: 'read_file', input: { path: 'README.md' } }], usage: { inputTokens: 10, outputTokens: 1 } },
      { text: 'Read it.', usage: { inputTokens: 10, outputTokens: 1 } },
    ]),
  );
}, 180_000);

afterAll(async () => {
  console.info(`hostile-model outcomes:\n  ${outcomes.join('\n  ')}`);
  await scene?.stop();
  await fake?.stop();
});

describe('a model that accepts the request and never answers', () => {
  it('holds one worker slot, not the worker, and ends at budget.timeout or the model call timeout', async () => {
    // One slot stuck: another run goes through while the hang goes on.
    await scene.ns.apply(hostileRun('hang-deadline', 'hang', { budget: { timeout: '20s' } }));
    await requestArrived('hang');
    await scene.ns.apply(scriptedRun('free-while-stuck'));
    const free = await finished('free-while-stuck');
    expect(free).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    expect((await scene.ns.status('hang-deadline')).phase).toBe('Running');

    // Both slots stuck: the next run waits for a slot, and gets one when a hang ends.
    await scene.ns.apply(hostileRun('hang-call-timeout', 'hang-long', { budget: { timeout: '10m' } }));
    await requestArrived('hang-long');
    await scene.ns.apply(scriptedRun('after-the-hang'));

    const deadline = await finished('hang-deadline');
    expect(deadline).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(deadline.message).toContain('reached spec.budget.timeout while waiting for the model to answer');
    // The worker stopped it: the controller's grace is 600 s, so it could not have.
    expect(secondsBetween(deadline)).toBeLessThan(20 + 30);

    const after = await finished('after-the-hang');
    expect(after).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });

    // No budget cuts this one: each attempt is cut by the call timeout, retried, then given up.
    const timedOut = await finished('hang-call-timeout', 150_000);
    expect(timedOut).toMatchObject({ phase: 'Failed', reason: 'ModelUnavailable' });
    expect(timedOut.message).toContain(`did not answer within ${MODEL_CALL_TIMEOUT_SECONDS * 1000} ms`);
    expect(timedOut.message).not.toContain('..');
    expect(fake.requestsFor('hang-long')).toHaveLength(5);
  }, 300_000);
});

describe('a model that answers 500 forever', () => {
  it('is retried with backoff, then the run fails with ModelUnavailable naming the status', async () => {
    await scene.ns.apply(hostileRun('always-500', 'error-500'));
    const status = await finished('always-500');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'ModelUnavailable' });
    expect(status.message).toContain('after 5 attempt(s)');
    expect(status.message).toContain('HTTP 500');
    expect(fake.requestsFor('error-500')).toHaveLength(5);
  });
});

describe('a model that answers garbage', () => {
  it.each([
    ['invalid-json', 'garbage-invalid-json'],
    ['wrong-shape', 'garbage-wrong-shape'],
    ['html-page', 'garbage-html-page'],
  ])('%s: fails at once with ModelResponseInvalid, not as a rejected request', async (model, name) => {
    await scene.ns.apply(hostileRun(name, model));
    const status = await finished(name);
    expect(status).toMatchObject({ phase: 'Failed', reason: 'ModelResponseInvalid' });
    expect(status.message).toMatch(/not a valid .*response/i);
    expect(status.message).not.toContain(API_KEY);
    expect(fake.requestsFor(model)).toHaveLength(1);
  });

  it('malformed tool-call JSON goes back to the model as a tool error; a model that keeps sending it fails with ModelResponseInvalid', async () => {
    await scene.ns.apply(hostileRun('garbage-tool-calls', 'malformed-tool-calls', { budget: { maxSteps: 10 } }));
    const status = await finished('garbage-tool-calls');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'ModelResponseInvalid', steps: 3 });
    expect(status.message).toContain('3 steps in a row with only tool calls that could not be run');
    expect(status.message).toContain('last: read_file: Invalid input for tool read_file');
    const requests = fake.requestsFor('malformed-tool-calls');
    // Given up long before maxSteps (10), and the model was told each time what was wrong.
    expect(requests).toHaveLength(3);
    const followUp = JSON.stringify(requests[1]!.body);
    expect(followUp).toContain('Invalid input for tool read_file');
  });
});

describe('after all that', () => {
  it('the operator is healthy and still runs a good run to the end', async () => {
    const health = await fetch(`http://127.0.0.1:${await scene.httpPort()}/healthz`);
    expect(health.status).toBe(200);
    await scene.ns.apply(scriptedRun('still-works'));
    expect(await finished('still-works')).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    expect(scene.operator.lines.map((line) => JSON.stringify(line)).join('\n')).not.toContain(API_KEY);
  });
});
