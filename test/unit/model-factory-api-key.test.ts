// The API key the model factory (workers/model-factory.ts) reads from a Secret reaches the
// Authorization header without the whitespace around it, as a git token does (git-token.ts).
// The shape check looked at the trimmed value but the raw one went into the header: a leading
// newline made undici throw with the key in its message (a key under 8 characters is not
// redacted, so it reached status.message and Events), and a leading byte order mark made every
// call throw a TypeError the calling policy does not know, retried until AgentFailed.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateText } from 'ai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CodingRunSpec } from '../../operator/src/api/index.ts';
import { createSystemCallingPolicyDependencies, type CallingPolicy } from '../../operator/src/providers/calling-policy.ts';
import { createModelFactory } from '../../operator/src/workers/model-factory.ts';
import type { RunResources } from '../../operator/src/workers/run-resources.ts';

const policy: CallingPolicy = {
  attemptTimeoutMs: 5_000,
  maxAttempts: 1,
  initialBackoffMs: 1,
  backoffFactor: 1,
  maxBackoffMs: 1,
  maxRetryAfterMs: 1,
};

const completion = JSON.stringify({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});

let server: Server;
let baseURL: string;
let received: IncomingHttpHeaders[];
beforeEach(async () => {
  received = [];
  server = createServer((request, response) => {
    received.push(request.headers);
    request.resume();
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(completion);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterEach(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** One model call with the Secret's key holding `value`: the answer's text, or the error's message. */
async function callWithKey(value: string): Promise<string> {
  const resources = { secretValue: async () => value } as unknown as RunResources;
  const models = createModelFactory(resources, policy, createSystemCallingPolicyDependencies());
  const model = { provider: 'openai-compatible', name: 'm', baseURL, apiKeySecretRef: { name: 'llm', key: 'apiKey' } };
  try {
    return (await generateText({ model: await models('team', model as CodingRunSpec['model']), prompt: 'hi', maxRetries: 0 })).text;
  } catch (error) {
    return `failed: ${(error as Error).message}`;
  }
}

describe('the model factory sends the Secret key without the whitespace around it', () => {
  it.each([
    ['a leading newline, with a key too short to redact', '\nabc123', 'abc123'],
    ['a leading CRLF and a trailing one', '\r\nsk-short\r\n', 'sk-short'],
    ['a leading byte order mark (U+FEFF is whitespace to String.prototype.trim)', '\ufeffsk-bom-key-12345678', 'sk-bom-key-12345678'],
    ['spaces and tabs around it', ' \tsk-spaced-key-1234 \t', 'sk-spaced-key-1234'],
  ])('%s: the call goes out with the trimmed key', async (_, value, key) => {
    expect(await callWithKey(value)).toBe('hi');
    expect(received.map((headers) => headers.authorization)).toEqual([`Bearer ${key}`]);
  });
});
