// The real provider adapters (@ai-sdk/openai, @ai-sdk/openai-compatible) over loopback HTTP
// against the fake OpenAI server, through generateText/streamText as the step worker calls
// them: with tools, maxRetries: 0 and our calling policy wrapped around the model.

import { generateText, InvalidToolInputError, NoSuchToolError, streamText, type ModelMessage } from 'ai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildToolSet } from '../../operator/src/agent/tool-definitions.ts';
import { usageOfModelCall } from '../../operator/src/agent/usage-accounting.ts';
import {
  createSystemCallingPolicyDependencies,
  type CallingPolicy,
  type CallingPolicyDependencies,
} from '../../operator/src/providers/calling-policy.ts';
import { createLanguageModel } from '../../operator/src/providers/create-language-model.ts';
import { ModelAuthFailedError } from '../../operator/src/providers/errors/model-auth-failed-error.ts';
import { ModelResponseInvalidError } from '../../operator/src/providers/errors/model-response-invalid-error.ts';
import { ModelTimeoutError } from '../../operator/src/providers/errors/model-timeout-error.ts';
import { ModelUnavailableError } from '../../operator/src/providers/errors/model-unavailable-error.ts';
import { MODEL_RESPONSE_MAX_BYTES } from '../../operator/src/providers/limit-response-size.ts';
import { withAnswerBounds, type ModelAnswer } from '../../operator/src/providers/with-answer-bounds.ts';
import { withCallingPolicy } from '../../operator/src/providers/with-calling-policy.ts';
import { toolMessage } from '../../operator/src/workers/tool-execution.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import { z } from 'zod';

const API_KEY = 'sk-planted-4f1c9e2a7b';
const policy: CallingPolicy = {
  attemptTimeoutMs: 400,
  maxAttempts: 3,
  initialBackoffMs: 1_000,
  backoffFactor: 2,
  maxBackoffMs: 8_000,
  maxRetryAfterMs: 30_000,
};

const tools = buildToolSet(['read_file', 'edit_file'], {
  read_file: { description: 'Read a file', inputSchema: z.object({ path: z.string() }) },
  edit_file: { description: 'Edit a file', inputSchema: z.object({ path: z.string(), oldString: z.string(), newString: z.string() }) },
});
const messages: ModelMessage[] = [{ role: 'user', content: 'Fix the bug.' }];

let server: FakeOpenAIServer;
let sleeps: number[];
let dependencies: CallingPolicyDependencies;

beforeEach(async () => {
  server = await startFakeOpenAIServer();
  sleeps = [];
  // Real timers (the timeout tests need a real hang to end), instant backoff.
  dependencies = {
    ...createSystemCallingPolicyDependencies(),
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  };
});

afterEach(async () => {
  await server.stop();
});

function model(provider: 'openai-compatible' | 'openai' = 'openai-compatible', attemptTimeoutMs = policy.attemptTimeoutMs) {
  const base = createLanguageModel({ provider, name: 'fake-model', baseURL: server.baseURL }, { apiKey: API_KEY });
  return withCallingPolicy(base, { policy: { ...policy, attemptTimeoutMs }, dependencies, secrets: [API_KEY] });
}

describe('openai-compatible over HTTP', () => {
  it('answers with tool calls and usage mapped from the server fields, sending the key as a bearer token', async () => {
    server.enqueue({
      type: 'tool-calls',
      toolCalls: [{ name: 'read_file', arguments: { path: 'src/app.ts' } }],
      usage: { promptTokens: 1200, completionTokens: 40, cachedTokens: 1000, reasoningTokens: 8 },
    });
    const result = await generateText({ model: model(), system: 'You are a coding agent.', messages, tools, maxRetries: 0 });

    expect(result.toolCalls.map((call) => [call.toolName, call.input])).toEqual([['read_file', { path: 'src/app.ts' }]]);
    expect(usageOfModelCall(result.usage)).toEqual({
      inputTokens: 1200,
      outputTokens: 40,
      cacheReadTokens: 1000,
      reasoningTokens: 8,
      totalTokens: 1240,
      complete: true,
    });
    const request = server.requests[0];
    expect(request?.path).toBe('/v1/chat/completions');
    expect(request?.headers.authorization).toBe(`Bearer ${API_KEY}`);
    const body = request?.body as { messages: Array<{ role: string; content: string }>; tools: Array<{ function: { name: string } }> };
    expect(body.messages).toEqual([
      { role: 'system', content: 'You are a coding agent.' },
      { role: 'user', content: 'Fix the bug.' },
    ]);
    expect(body.tools.map((tool) => tool.function.name)).toEqual(['read_file', 'edit_file']);
  });

  it('streams text and asks for usage in the stream', async () => {
    server.enqueue({ type: 'text', text: 'All done, tests pass.', usage: { promptTokens: 300, completionTokens: 7 } });
    const result = streamText({ model: model(), messages, tools, maxRetries: 0 });
    expect(await result.text).toBe('All done, tests pass.');
    expect(usageOfModelCall(await result.usage)).toMatchObject({ inputTokens: 300, outputTokens: 7, totalTokens: 307, complete: true });
    expect((server.requests[0]?.body as { stream_options?: unknown }).stream_options).toEqual({ include_usage: true });
  });

  it('marks usage incomplete when the server reports none', async () => {
    server.enqueue({ type: 'text', text: 'ok' });
    const result = await generateText({ model: model(), messages, maxRetries: 0 });
    expect(usageOfModelCall(result.usage).complete).toBe(false);
  });

  it('retries a 429 after its Retry-After and then succeeds', async () => {
    server.enqueue(
      { type: 'error', status: 429, message: 'Rate limit reached', headers: { 'retry-after': '2' } },
      { type: 'text', text: 'ok', usage: { promptTokens: 1, completionTokens: 1 } },
    );
    const result = await generateText({ model: model(), messages, maxRetries: 0 });
    expect(result.text).toBe('ok');
    expect(server.requests).toHaveLength(2);
    expect(sleeps).toEqual([2_000]);
  });

  it('fails with ModelAuthFailed at once on 401, without retrying, and the key is not in the message', async () => {
    server.enqueue({ type: 'error', status: 401, message: `Incorrect API key provided: ${API_KEY}` });
    const error = await generateText({ model: model(), messages, maxRetries: 0 }).catch((e: unknown) => e);
    expect(ModelAuthFailedError.isInstance(error)).toBe(true);
    expect((error as ModelAuthFailedError).reason).toBe('ModelAuthFailed');
    expect((error as Error).message).not.toContain(API_KEY);
    expect(server.requests).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it('gives up with ModelUnavailable after the bounded retries when the server keeps failing with 500', async () => {
    await server.stop();
    server = await startFakeOpenAIServer({ whenExhausted: { type: 'error', status: 500, message: 'upstream exploded' } });
    const error = await generateText({ model: model(), messages, maxRetries: 0 }).catch((e: unknown) => e);
    expect(ModelUnavailableError.isInstance(error)).toBe(true);
    expect((error as ModelUnavailableError).attempts).toBe(3);
    expect(server.requests).toHaveLength(3);
    expect(sleeps).toHaveLength(2);
    expect(sleeps[0]).toBeGreaterThanOrEqual(500);
    expect(sleeps[0]).toBeLessThanOrEqual(1_000);
    expect(sleeps[1]).toBeGreaterThanOrEqual(1_000);
    expect(sleeps[1]).toBeLessThanOrEqual(2_000);
  });

  it('ends a hanging request with the per-attempt timeout and retries it', async () => {
    server.enqueue({ type: 'hang' }, { type: 'text', text: 'finally', usage: { promptTokens: 1, completionTokens: 1 } });
    const started = Date.now();
    const result = await generateText({ model: model(), messages, maxRetries: 0 });
    expect(result.text).toBe('finally');
    expect(server.requests).toHaveLength(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(policy.attemptTimeoutMs - 50);
  });

  it('reports ModelUnavailable caused by ModelTimeout when every attempt hangs', async () => {
    await server.stop();
    server = await startFakeOpenAIServer({ whenExhausted: { type: 'hang' } });
    const error = await generateText({ model: model(), messages, maxRetries: 0 }).catch((e: unknown) => e);
    expect(ModelUnavailableError.isInstance(error)).toBe(true);
    expect(ModelTimeoutError.isInstance((error as Error).cause)).toBe(true);
    expect(server.requests).toHaveLength(3);
  });

  it('ends a stream that stalls after its first chunk with a ModelTimeout error', async () => {
    server.enqueue({ type: 'hang', afterFirstChunk: true });
    const result = streamText({ model: model(), messages, maxRetries: 0 });
    // The timeout errors the model stream; streamText passes it on to whoever reads.
    const thrown = await (async () => {
      for await (const part of result.fullStream) void part;
    })().catch((error: unknown) => error);
    expect(ModelTimeoutError.isInstance(thrown)).toBe(true);
    expect((thrown as Error).message).toContain('openai-compatible');
    // A stream is never retried: parts may already have reached the caller.
    expect(server.requests).toHaveLength(1);
  });

  it.each([false, true])(
    'surfaces malformed tool-call JSON as an invalid call and a tool error, not a failure (stream: %s)',
    async (stream) => {
      server.enqueue({
        type: 'tool-calls',
        toolCalls: [
          { name: 'read_file', arguments: '{"path": "src/app.ts"', id: 'call_bad' },
          { name: 'read_file', arguments: { path: 'README.md' }, id: 'call_good' },
        ],
        usage: { promptTokens: 10, completionTokens: 5 },
      });
      const result = stream
        ? await (async () => {
            const streamed = streamText({ model: model(), messages, tools, maxRetries: 0 });
            return { toolCalls: await streamed.toolCalls, response: await streamed.response };
          })()
        : await generateText({ model: model(), messages, tools, maxRetries: 0 });

      const bad = result.toolCalls.find((call) => call.toolCallId === 'call_bad');
      const good = result.toolCalls.find((call) => call.toolCallId === 'call_good');
      expect(bad?.invalid).toBe(true);
      expect(InvalidToolInputError.isInstance(bad?.error)).toBe(true);
      expect(bad?.input).toBe('{"path": "src/app.ts"'); // the raw text, for the worker to quote
      expect(good?.invalid).toBeUndefined();
      expect(good?.input).toEqual({ path: 'README.md' });
      // The SDK already answered the invalid call with an error result the model will see.
      const toolMessage = result.response.messages.find((message) => message.role === 'tool');
      expect(toolMessage?.content).toEqual([
        expect.objectContaining({ type: 'tool-result', toolCallId: 'call_bad', output: expect.objectContaining({ type: 'error-text' }) }),
      ]);
    },
  );

  it('surfaces a call of a tool that was not offered as an invalid call with NoSuchToolError', async () => {
    server.enqueue({ type: 'tool-calls', toolCalls: [{ name: 'rm_rf', arguments: {} }] });
    const result = await generateText({ model: model(), messages, tools, maxRetries: 0 });
    expect(result.toolCalls[0]?.invalid).toBe(true);
    expect(NoSuchToolError.isInstance(result.toolCalls[0]?.error)).toBe(true);
  });

  it.each([
    ['not JSON', { type: 'raw' as const, body: '{"id":"chatcmpl-1","choices":[{"index":0,' }, /the body is not JSON\. /],
    ['JSON of another shape', { type: 'raw' as const, body: '{"status":"ok"}' }, /the JSON does not have the shape of a model response/],
    [
      'an HTML page',
      { type: 'raw' as const, contentType: 'text/html', body: '<html><body>Welcome to nginx!</body></html>' },
      /the body is not JSON\. /,
    ],
    // The SDK throws InvalidResponseDataError from inside the provider: it was passed on as an
    // unknown error, and the step job retried it ten times, a paid call each.
    [
      'a chat completion with no choices',
      { type: 'raw' as const, body: '{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":90000,"completion_tokens":1}}' },
      /the JSON is not a usable model response/,
    ],
  ])(
    'fails with ModelResponseInvalid at once when a 200 answer is %s, saying what is wrong but quoting none of it (security #11.3)',
    async (_, reply, detail) => {
      server.enqueue(reply);
      const error = await generateText({ model: model(), messages, tools, maxRetries: 0 }).catch((e: unknown) => e);
      expect(ModelResponseInvalidError.isInstance(error)).toBe(true);
      expect((error as ModelResponseInvalidError).reason).toBe('ModelResponseInvalid');
      expect((error as Error).message).toMatch(detail);
      expect((error as Error).message).not.toMatch(/chatcmpl-1|nginx|"status"/);
      expect((error as Error).message).not.toContain(API_KEY);
      expect(server.requests).toHaveLength(1);
      expect(sleeps).toEqual([]);
    },
  );

  it('stops reading an answer that never ends at the size bound: ModelResponseInvalid, no retry', async () => {
    server.enqueue({ type: 'endless' });
    // Reading the bound's bytes on a busy machine may take longer than this file's short attempt timeout.
    const error = await generateText({ model: model('openai-compatible', 60_000), messages, maxRetries: 0 }).catch((e: unknown) => e);
    expect(ModelResponseInvalidError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain(`larger than ${MODEL_RESPONSE_MAX_BYTES / 1_048_576} MiB`);
    expect(server.requests).toHaveLength(1);
  });

  it('sends the tool results of the previous step back in the conversation', async () => {
    server.enqueue({ type: 'text', text: 'done' });
    await generateText({
      model: model(),
      tools,
      maxRetries: 0,
      messages: [
        ...messages,
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'read_file', input: { path: 'a.ts' } }] },
        {
          role: 'tool',
          content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'read_file', output: { type: 'text', value: 'const a = 1;' } }],
        },
      ],
    });
    const sent = (server.requests[0]?.body as { messages: unknown[] }).messages;
    expect(sent).toContainEqual({ role: 'tool', tool_call_id: 'c1', content: 'const a = 1;' });
  });
});

// The step's model: the calling policy inside, the answer bounds around it (workers/step-job.ts).
describe('answer bounds over HTTP', () => {
  const bounded = (answers: ModelAnswer[]) =>
    withAnswerBounds(model('openai-compatible', 30_000), { maxToolCalls: 65, onAnswer: (answer) => answers.push(answer) });

  // The SDK's work per answer grew faster than its calls: 170 000 of them ran the operator out of heap.
  // A stream frames each call in four events: 2 000 of them is what fits in the answer's size bound.
  // 5 000 whole calls fit the answer's JSON item bound (about six items each); more are refused below.
  it.each([
    [false, 5_000],
    [true, 2_000],
  ])('gives the SDK the first 65 tool calls of an answer, one request (stream: %s, %i calls)', async (stream, calls) => {
    server.enqueue({
      type: 'tool-calls',
      toolCalls: Array.from({ length: calls }, (_, index) => ({ name: 'read_file', arguments: { path: `f${index}` }, id: `c${index}` })),
      usage: { promptTokens: 100, completionTokens: 90_000 },
    });
    const answers: ModelAnswer[] = [];
    const toolCalls = stream
      ? await streamText({ model: bounded(answers), messages, tools, maxRetries: 0 }).toolCalls
      : (await generateText({ model: bounded(answers), messages, tools, maxRetries: 0 })).toolCalls;
    expect(toolCalls.map((call) => call.toolCallId)).toEqual(Array.from({ length: 65 }, (_, index) => `c${index}`));
    expect(answers).toHaveLength(1);
    expect(answers[0]?.droppedToolCalls).toBe(calls - 65);
    expect(answers[0]?.usage.outputTokens.total).toBe(90_000);
    expect(server.requests).toHaveLength(1);
  });

  it('refuses an answer of 20 000 tool calls as it downloads: more JSON items than any answer holds, one request', async () => {
    server.enqueue({
      type: 'tool-calls',
      toolCalls: Array.from({ length: 20_000 }, (_, index) => ({ name: 'read_file', arguments: { path: `f${index}` }, id: `c${index}` })),
      usage: { promptTokens: 100, completionTokens: 90_000 },
    });
    const answers: ModelAnswer[] = [];
    const error = await generateText({ model: bounded(answers), messages, tools, maxRetries: 0 }).catch((e: unknown) => e);
    expect(String((error as Error).message)).toMatch(/more than 65536 JSON objects, arrays and members/);
    expect(answers).toEqual([]);
    expect(server.requests).toHaveLength(1);
  });

  // The SDK parses a whole answer as JSON whatever its Content-Type: labelled otherwise, 20 000
  // calls reached it, and four such answers at once ran a 160 MiB heap out.
  it.each([['text/plain'], ['text/event-stream']])(
    'refuses an answer of 20 000 tool calls labelled %s to a call that asked for no stream, one request',
    async (contentType) => {
      const toolCalls = Array.from({ length: 20_000 }, (_, index) => ({
        id: `c${index}`,
        type: 'function',
        function: { name: 'read_file', arguments: JSON.stringify({ path: `f${index}` }) },
      }));
      const body = JSON.stringify({
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 0,
        model: 'fake-model',
        choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: toolCalls }, finish_reason: 'tool_calls' }],
        usage: { prompt_tokens: 100, completion_tokens: 90_000, total_tokens: 90_100 },
      });
      server.enqueue({ type: 'raw', body, contentType });
      const answers: ModelAnswer[] = [];
      const error = await generateText({ model: bounded(answers), messages, tools, maxRetries: 0 }).catch((e: unknown) => e);
      expect(String((error as Error).message)).toMatch(/more than 65536 JSON objects, arrays and members/);
      expect(answers).toEqual([]);
      expect(server.requests).toHaveLength(1);
      expect((server.requests[0]?.body as { stream?: boolean }).stream).toBeUndefined();
    },
  );

  // Unbounded, the SDK's recursive copy of the parsed arguments overflowed the stack (RangeError).
  it('answers arguments nested 5 000 deep with a tool error, and the usage is told: one request, no retry', async () => {
    // A call its tool refuses (path is not a string): the SDK keeps such a call's parsed arguments.
    const nested = `{"path":5,"x":${'['.repeat(5_000)}${']'.repeat(5_000)}}`;
    server.enqueue({
      type: 'tool-calls',
      toolCalls: [{ name: 'read_file', arguments: nested, id: 'call_deep' }],
      usage: { promptTokens: 40, completionTokens: 10_000 },
    });
    const answers: ModelAnswer[] = [];
    const result = await generateText({ model: bounded(answers), messages, tools, maxRetries: 0 });
    expect(result.toolCalls[0]).toMatchObject({ toolCallId: 'call_deep', invalid: true });
    const toolMessage = result.response.messages.find((message) => message.role === 'tool');
    expect(toolMessage?.content).toEqual([
      expect.objectContaining({
        toolCallId: 'call_deep',
        output: { type: 'error-text', value: expect.stringContaining('nested more than 64 levels deep') },
      }),
    ]);
    expect(answers[0]).toMatchObject({ tooDeepValues: 1, usage: { inputTokens: expect.objectContaining({ total: 40 }) } });
    expect(server.requests).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });
});

describe('openai (Responses API) over HTTP', () => {
  it.each([false, true])('answers with tool calls and usage from the Responses usage fields (stream: %s)', async (stream) => {
    server.enqueue({
      type: 'tool-calls',
      text: 'Reading it.',
      toolCalls: [{ name: 'read_file', arguments: { path: 'src/app.ts' } }],
      usage: { promptTokens: 900, completionTokens: 30, cachedTokens: 512, reasoningTokens: 12 },
    });
    const result = stream
      ? await (async () => {
          const streamed = streamText({ model: model('openai'), messages, tools, maxRetries: 0 });
          return { toolCalls: await streamed.toolCalls, usage: await streamed.usage };
        })()
      : await generateText({ model: model('openai'), messages, tools, maxRetries: 0 });
    expect(server.requests[0]?.path).toBe('/v1/responses');
    expect(server.requests[0]?.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(result.toolCalls.map((call) => call.input)).toEqual([{ path: 'src/app.ts' }]);
    expect(usageOfModelCall(result.usage)).toEqual({
      inputTokens: 900,
      outputTokens: 30,
      cacheReadTokens: 512,
      reasoningTokens: 12,
      totalTokens: 930,
      complete: true,
    });
  });

  it('sends an image read_file returned as an input_image of the function call output (#13.7)', async () => {
    server.enqueue({ type: 'text', text: 'a pixel' });
    const image = {
      mediaType: 'image/png',
      data: 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
    };
    await generateText({
      model: model('openai'),
      tools,
      maxRetries: 0,
      messages: [
        ...messages,
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'read_file', input: { path: 'a.png' } }] },
        toolMessage([{ toolCallId: 'c1', toolName: 'read_file', ok: true, text: '[image image/png: shown below]', image }]),
      ],
    });
    const input = (server.requests[0]?.body as { input: Array<{ type?: string; call_id?: string; output?: unknown }> }).input;
    expect(input.find((item) => item.type === 'function_call_output')).toMatchObject({
      call_id: 'c1',
      output: [
        { type: 'input_text', text: '[image image/png: shown below]' },
        { type: 'input_image', image_url: `data:image/png;base64,${image.data}` },
      ],
    });
  });

  it('fails with ModelAuthFailed on 403', async () => {
    server.enqueue({ type: 'error', status: 403, message: 'Project does not have access to model' });
    const error = await generateText({ model: model('openai'), messages, maxRetries: 0 }).catch((e: unknown) => e);
    expect(ModelAuthFailedError.isInstance(error)).toBe(true);
    expect(server.requests).toHaveLength(1);
  });
});
