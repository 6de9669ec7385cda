// Security #11.3, performed as an attacker would, against a real loopback HTTP server that
// records every request: a run author who may create CodingRuns tries to send a Secret of the
// namespace to an endpoint of their choosing, and to read an internal page back through the
// run's status. The operator's own functions, wired as agent-runtime wires them.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateText } from 'ai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codingRunSpec, type CodingRun } from '../../operator/src/api/index.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { createSystemCallingPolicyDependencies, type CallingPolicy } from '../../operator/src/providers/calling-policy.ts';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { ModelRequestRejectedError } from '../../operator/src/providers/errors/model-request-rejected-error.ts';
import { ModelResponseInvalidError } from '../../operator/src/providers/errors/model-response-invalid-error.ts';
import { validateRun } from '../../operator/src/reconcile/validate-run.ts';
import { readNamespacePolicy } from '../../operator/src/reconcile/namespace-policy.ts';
import { endpointCheckedModelFactory } from '../../operator/src/workers/endpoint-checked-model-factory.ts';
import { createModelFactory } from '../../operator/src/workers/model-factory.ts';
import { createLanguageModel } from '../../operator/src/providers/create-language-model.ts';
import { withCallingPolicy } from '../../operator/src/providers/with-calling-policy.ts';

const isRunFailure = (error: unknown, reason: string): boolean => RunFailure.isInstance(error) && error.reason === reason;

const API_KEY = 'sk-tenant-b-8d2f61c0a9e4';
const INTERNAL_SECRET = 'AKIAINTERNAL0123456789';
const LABELLED = { 'chamvi.dev/usable-by-runs': 'true' };
const policy: CallingPolicy = {
  attemptTimeoutMs: 5_000,
  maxAttempts: 1,
  initialBackoffMs: 1,
  backoffFactor: 1,
  maxBackoffMs: 1,
  maxRetryAfterMs: 1,
};

interface Reply {
  status: number;
  statusText?: string;
  contentType: string;
  body: string;
  headers?: Record<string, string>;
}

/** An "internal service": records requests, answers each with the next reply. */
class RecordingServer {
  readonly requests: { path: string; headers: IncomingHttpHeaders }[] = [];
  readonly replies: Reply[] = [];
  private server!: Server;
  baseURL = '';

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      this.requests.push({ path: request.url ?? '', headers: request.headers });
      request.resume();
      const reply = this.replies.shift() ?? { status: 500, contentType: 'text/plain', body: 'no reply scripted' };
      response.writeHead(reply.status, reply.statusText ?? '', { 'content-type': reply.contentType, ...reply.headers });
      response.end(reply.body);
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.baseURL = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const completion = (text: string) =>
  JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });

let server: RecordingServer;
beforeEach(async () => {
  server = new RecordingServer();
  await server.start();
});
afterEach(async () => {
  await server.stop();
});

function attackRun(baseURL: string): CodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: 'exfiltrate', namespace: 'team-b', uid: 'uid-1', generation: 1, resourceVersion: '1' },
    spec: {
      task: 'Say hi',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'openai-compatible', name: 'm', baseURL, apiKeySecretRef: { name: 'llm' } },
    } as CodingRun['spec'],
  };
}

/** The Secret as the namespace holds it, the run's resources as the worker reads them, and the worker's model factory. */
function world(run: CodingRun, allowModelEndpoints: string[], secretLabels: Record<string, string>, apiKey = API_KEY) {
  const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], allowModelEndpoints }, {});
  const objects = {
    configMaps: new Map(),
    secrets: new Map([['llm', { apiKey }]]),
    secretLabels: new Map([['llm', secretLabels]]),
  };
  const resources = memoryRunResources(new MemoryKubeGateway(run, objects, () => undefined));
  let secretReads = 0;
  const counted = {
    ...resources,
    secretValue: (...args: Parameters<typeof resources.secretValue>) => (secretReads++, resources.secretValue(...args)),
  };
  const models = endpointCheckedModelFactory(createModelFactory(counted, policy, createSystemCallingPolicyDependencies()), config);
  const spec = codingRunSpec.parse(run.spec);
  const found = { secrets: { llm: ['apiKey'] }, configMaps: {}, secretLabels: { llm: secretLabels } };
  return { config, spec, models, found, secretReads: () => secretReads };
}

const sentKey = () => server.requests.some((request) => JSON.stringify(request.headers).includes(API_KEY));

describe('security #11.3 a run cannot send a Secret to an endpoint the admin did not list', () => {
  it('control: with the endpoint listed and the Secret labelled, the key reaches the endpoint (the test can see it)', async () => {
    const run = attackRun(server.baseURL);
    const { spec, models, found, config } = world(run, [server.baseURL], LABELLED);
    expect(validateRun(run, spec, config, found)).toBeUndefined();
    server.replies.push({ status: 200, contentType: 'application/json', body: completion('hi') });
    const result = await generateText({ model: await models('team-b', spec.model), prompt: 'hi', maxRetries: 0 });
    expect(result.text).toBe('hi');
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]!.headers.authorization).toBe(`Bearer ${API_KEY}`);
  });

  it('refuses at admission an openai-compatible run at an endpoint not in allowModelEndpoints, and the worker never calls it', async () => {
    const run = attackRun(server.baseURL);
    const { spec, models, found, config, secretReads } = world(run, ['https://llm.internal/v1'], LABELLED);
    expect(validateRun(run, spec, config, found)).toMatchObject({
      reason: 'ModelEndpointNotAllowed',
      message: expect.stringContaining('allowModelEndpoints'),
    });
    // A run that got past admission anyway (the list changed, or its spec was never checked):
    // the worker refuses before it reads the Secret or sends a byte.
    const error = await models('team-b', spec.model).catch((e: unknown) => e);
    expect(isRunFailure(error, 'ModelEndpointNotAllowed')).toBe(true);
    expect((error as RunFailure).reason).toBe('ModelEndpointNotAllowed');
    expect(secretReads()).toBe(0);
    expect(server.requests).toHaveLength(0);
  });

  it("refuses at the next call an endpoint the run's namespace was narrowed off after admission, before the Secret is read", async () => {
    const run = attackRun(server.baseURL);
    const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], allowModelEndpoints: [server.baseURL] }, {});
    const { spec, secretReads } = world(run, [server.baseURL], LABELLED);
    let secretRead = 0;
    const inner: Parameters<typeof endpointCheckedModelFactory>[0] = async () => {
      secretRead++;
      throw new Error('the model would be built now');
    };
    const narrowed = { policyOf: async () => readNamespacePolicy({ 'chamvi.dev/allow-model-endpoints': 'https://llm.internal/v1' }) };
    const error = await endpointCheckedModelFactory(inner, config, narrowed)('team-b', spec.model).catch((e: unknown) => e);
    expect(isRunFailure(error, 'ModelEndpointNotAllowed')).toBe(true);
    expect((error as Error).message).toMatch(/^namespace team-b is narrowed by its chamvi\.dev\/allow-model-endpoints annotation/);
    expect(secretRead + secretReads()).toBe(0);
    // Not narrowed (or narrowed to a list that has it): built as before.
    const open = { policyOf: async () => readNamespacePolicy({}) };
    await expect(endpointCheckedModelFactory(inner, config, open)('team-b', spec.model)).rejects.toThrow('the model would be built now');
  });

  it('refuses with an empty allowModelEndpoints, the default', async () => {
    const run = attackRun(server.baseURL);
    const { spec, models, found, config } = world(run, [], LABELLED);
    expect(validateRun(run, spec, config, found)).toMatchObject({ reason: 'ModelEndpointNotAllowed' });
    await expect(models('team-b', spec.model)).rejects.toMatchObject({ reason: 'ModelEndpointNotAllowed' });
    expect(server.requests).toHaveLength(0);
  });

  it('refuses a Secret without the usable-by-runs label at admission and at the point of use: its value is never sent', async () => {
    const run = attackRun(server.baseURL);
    const { spec, models, found, config } = world(run, [server.baseURL], { team: 'b' });
    const refusal = validateRun(run, spec, config, found);
    expect(refusal).toMatchObject({ reason: 'SecretNotAllowed' });
    expect(refusal!.message).toContain('kubectl label secret llm -n team-b chamvi.dev/usable-by-runs=true');
    server.replies.push({ status: 200, contentType: 'application/json', body: completion('hi') });
    const error = await models('team-b', spec.model).catch((e: unknown) => e);
    expect(isRunFailure(error, 'SecretNotAllowed')).toBe(true);
    expect((error as RunFailure).reason).toBe('SecretNotAllowed');
    expect(server.requests).toHaveLength(0);
    expect(sentKey()).toBe(false);
  });

  it('answers the same for a Secret not offered to runs whether or not it has the key named, so no key name is probed', () => {
    const withKey = attackRun(server.baseURL);
    const withoutKey = attackRun(server.baseURL);
    (withoutKey.spec.model.apiKeySecretRef as { key?: string }).key = 'ssh-privatekey';
    const refusals = [withKey, withoutKey].map((run) => {
      const { spec, found, config } = world(run, [server.baseURL], { team: 'b' });
      return validateRun(run, spec, config, found);
    });
    expect(refusals[0]).toMatchObject({ reason: 'SecretNotAllowed' });
    expect(refusals[1]).toEqual(refusals[0]);
  });

  it('refuses a label with another value than "true"', () => {
    const run = attackRun(server.baseURL);
    const { spec, found, config } = world(run, [server.baseURL], { 'chamvi.dev/usable-by-runs': 'yes' });
    expect(validateRun(run, spec, config, found)).toMatchObject({ reason: 'SecretNotAllowed' });
  });
});

describe('security #11.3 a listed endpoint cannot redirect the call', () => {
  it.each([
    [
      'a path outside the listed prefix, on the same origin (the key would go with it)',
      (base: string) => `${new URL(base).origin}/admin/keys`,
    ],
    ['another host and port (the conversation would be posted there)', (_base: string, other: string) => `${other}/latest/meta-data`],
  ])('follows no 307 to %s: the run fails ModelRequestRejected, saying so', async (_, location) => {
    const other = new RecordingServer();
    await other.start();
    try {
      const run = attackRun(server.baseURL);
      const { spec, models } = world(run, [server.baseURL], LABELLED);
      server.replies.push({
        status: 307,
        contentType: 'application/json',
        body: '{}',
        headers: { location: location(server.baseURL, new URL(other.baseURL).origin) },
      });
      server.replies.push({ status: 200, contentType: 'application/json', body: completion('followed') });
      other.replies.push({ status: 200, contentType: 'application/json', body: completion('followed') });
      const error = await generateText({ model: await models('team-b', spec.model), prompt: 'hi', maxRetries: 0 }).catch((e: unknown) => e);
      expect(ModelRequestRejectedError.isInstance(error), String(error)).toBe(true);
      expect((error as Error).message).toContain('HTTP 307');
      expect((error as Error).message).toContain('redirect, which the operator does not follow');
      expect(server.requests.map((request) => request.path)).toEqual(['/v1/chat/completions']);
      expect(other.requests).toHaveLength(0);
    } finally {
      await other.stop();
    }
  });
});

describe('security #11.3 an endpoint answer reflects only a bounded JSON error.message', () => {
  const page = `<html><body><h1>Internal admin</h1><pre>AWS_SECRET_ACCESS_KEY=${INTERNAL_SECRET}</pre></body></html>`;

  async function failedCall(reply: Reply): Promise<Error> {
    const run = attackRun(server.baseURL);
    const { spec, models } = world(run, [server.baseURL], LABELLED);
    server.replies.push(reply);
    return (await generateText({ model: await models('team-b', spec.model), prompt: 'hi', maxRetries: 0 }).catch(
      (e: unknown) => e,
    )) as Error;
  }

  it('shows nothing but the HTTP status of an HTML error page, nor its reason phrase', async () => {
    const error = await failedCall({ status: 404, statusText: `Not Found ${INTERNAL_SECRET}`, contentType: 'text/html', body: page });
    expect(ModelRequestRejectedError.isInstance(error)).toBe(true);
    expect(error.message).toContain('HTTP 404');
    expect(error.message).not.toContain(INTERNAL_SECRET);
    expect(error.message).not.toContain('Internal admin');
    expect(server.requests).toHaveLength(1);
  });

  it('shows nothing of a 200 page that is not a model response', async () => {
    const error = await failedCall({ status: 200, contentType: 'text/html', body: page });
    expect(ModelResponseInvalidError.isInstance(error)).toBe(true);
    expect(error.message).toContain('HTTP 200');
    expect(error.message).not.toContain(INTERNAL_SECRET);
    expect(error.message).not.toContain('<html>');
  });

  it('shows nothing of a JSON body that is not a provider error', async () => {
    const error = await failedCall({
      status: 400,
      contentType: 'application/json',
      body: JSON.stringify({ detail: page, message: INTERNAL_SECRET }),
    });
    expect(error.message).toContain('HTTP 400');
    expect(error.message).not.toContain(INTERNAL_SECRET);
  });

  it("shows a provider's error.message, at most 300 characters, without control or bidi characters", async () => {
    const message = `model m does not exist\u001b]0;owned\u0007\u202e${'x'.repeat(400)}`;
    const error = await failedCall({
      status: 404,
      contentType: 'application/json',
      body: JSON.stringify({ error: { message, type: 'invalid_request_error' } }),
    });
    expect(ModelRequestRejectedError.isInstance(error)).toBe(true);
    expect(error.message).toContain('model m does not exist');
    expect(error.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect(error.message).not.toContain('x'.repeat(301));
    expect(error.message).toContain('x'.repeat(250));
  });
});

// A run author may name any key of a labelled Secret as the API key: a PEM private key, a
// credentials file. A value with a line break made fetch refuse the Authorization header with
// the whole value quoted in its message, which went to the run's status, Events and logs.
const PEM = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n';

describe('a Secret value that is not an API key is never quoted', () => {
  it('the worker refuses it ModelConfigurationInvalid, naming the Secret and key only, and sends nothing', async () => {
    const run = attackRun(server.baseURL);
    const { spec, models } = world(run, [server.baseURL], LABELLED, PEM);
    const refused = await models('team-b', spec.model).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isRunFailure(refused, 'ModelConfigurationInvalid')).toBe(true);
    expect((refused as Error).message).toContain('Secret team-b/llm key "apiKey" does not hold an API key');
    expect((refused as Error).message).not.toContain('b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ');
    expect(server.requests).toHaveLength(0);
  });

  it('a key read from a file, ending in a newline, is still a key', async () => {
    const run = attackRun(server.baseURL);
    const { spec, models } = world(run, [server.baseURL], LABELLED, `${API_KEY}\n`);
    server.replies.push({ status: 200, contentType: 'application/json', body: completion('hi') });
    const result = await generateText({ model: await models('team-b', spec.model), prompt: 'hi', maxRetries: 0 });
    expect(result.text).toBe('hi');
  });

  it('past the factory, an error that quotes the key goes on redacted, without its cause', async () => {
    const spec = codingRunSpec.parse(attackRun(server.baseURL).spec);
    const model = withCallingPolicy(createLanguageModel(spec.model, { apiKey: PEM }), {
      policy,
      dependencies: createSystemCallingPolicyDependencies(),
      secrets: [PEM],
    });
    const failed = await generateText({ model, prompt: 'hi', maxRetries: 0 }).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(failed?.message).toContain('[redacted]');
    expect(JSON.stringify({ message: failed?.message, stack: failed?.stack, cause: String(failed?.cause) })).not.toContain('b3BlbnNzaC1');
    expect(server.requests).toHaveLength(0);
  });
});
