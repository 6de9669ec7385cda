// A Responses API failure reported inside a 200 answer (`{"error":{...}}`, a response whose
// status is failed) whose code says the provider was busy or broke (server_error,
// rate_limit_exceeded, ...) is tried again like a 5xx or 429, not a rejection that fails the run.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText } from 'ai';
import { describe, expect, it } from 'vitest';
import { callWithPolicy } from '../../operator/src/providers/call-with-policy.ts';
import { DEFAULT_CALLING_POLICY } from '../../operator/src/providers/calling-policy.ts';
import { classifyModelError } from '../../operator/src/providers/classify-model-error.ts';
import { ModelContextTooLongError } from '../../operator/src/providers/errors/model-context-too-long-error.ts';
import { ModelRequestRejectedError } from '../../operator/src/providers/errors/model-request-rejected-error.ts';
import { ModelUnavailableError } from '../../operator/src/providers/errors/model-unavailable-error.ts';

const context = { provider: 'openai', now: 0, secrets: [] };
const json = { 'content-type': 'application/json' };

/** A Responses model whose endpoint answers each call with the next of `answers` (the last one repeated). */
function modelAnswering(answers: ReadonlyArray<{ body: object; headers?: Record<string, string> }>) {
  let calls = 0;
  const openai = createOpenAI({
    apiKey: 'k',
    fetch: async () => {
      const answer = answers[Math.min(calls, answers.length - 1)]!;
      calls += 1;
      return new Response(JSON.stringify(answer.body), { status: 200, headers: { ...json, ...answer.headers } });
    },
  });
  return { model: openai.responses('gpt-5'), calls: () => calls };
}

/** What a Responses model throws for a 200 answer of `body`, and what classifyModelError makes of it. */
async function classified(body: object, headers?: Record<string, string>) {
  const { model } = modelAnswering([{ body, ...(headers === undefined ? {} : { headers }) }]);
  const thrown = await generateText({ model, prompt: 'hi', maxRetries: 0 }).then(
    () => undefined,
    (error: unknown) => error,
  );
  return classifyModelError(thrown, context);
}

const reportedAs = {
  // Its type says server_error even when the code refuses the request: the code decides.
  'an error with a type (the SDK makes it a 400)': (error: object) => ({ error: { type: 'server_error', param: null, ...error } }),
  'an error with code and message only': (error: object) => ({ error }),
  'a failed response': (error: object) => ({ id: 'r', object: 'response', status: 'failed', error, output: [] }),
};
const shapes = Object.entries(reportedAs);

describe('classifyModelError on a Responses API error reported in a 200 answer', () => {
  const transientCodes = [
    'server_error',
    'rate_limit_exceeded',
    'overloaded',
    'server_is_overloaded',
    'internal_error',
    'vector_store_timeout',
  ];
  for (const [shape, body] of shapes) {
    it.each(transientCodes)(`retries ${shape} with code %s, naming the code and not the message`, async (code) => {
      const classification = await classified(body({ code, message: 'Please retry; see http://internal.example/secret-page' }));
      expect(classification).toMatchObject({ kind: 'transient', statusCode: 200, retryAfterMs: undefined });
      const problem = (classification as { problem: string }).problem;
      expect(problem).toContain(code);
      expect(problem).not.toContain('internal.example');
    });
  }

  it('honours the Retry-After the answer came with', async () => {
    const classification = await classified({ error: { code: 'rate_limit_exceeded', message: 'slow down' } }, { 'retry-after-ms': '1500' });
    expect(classification).toMatchObject({ kind: 'transient', retryAfterMs: 1500 });
  });

  it('retries an error with no code whose type says the server broke', async () => {
    const classification = await classified({
      error: { type: 'server_error', code: null, param: null, message: 'The server had an error' },
    });
    expect(classification).toMatchObject({ kind: 'transient', problem: 'HTTP 200 reporting server_error' });
  });

  it.each([
    ['a client error', { code: 'invalid_prompt', message: 'Invalid prompt: flagged' }, ModelRequestRejectedError],
    [
      'quota spent (not retried: it stays spent)',
      { code: 'insufficient_quota', message: 'You exceeded your quota' },
      ModelRequestRejectedError,
    ],
    [
      'over the context window',
      { code: 'context_length_exceeded', message: 'Your input exceeds the context window' },
      ModelContextTooLongError,
    ],
  ])('still fails at once for %s', async (_name, error, expected) => {
    for (const [, body] of shapes) {
      const classification = await classified(body(error));
      expect(classification.kind).toBe('fatal');
      expect(expected.isInstance((classification as { error: unknown }).error)).toBe(true);
    }
  });
});

describe('classifyModelError on an HTTP 400 whose body says server_error', () => {
  it('leaves it a rejection: the status the endpoint sent decides, not the code in its body', async () => {
    const openai = createOpenAI({
      apiKey: 'k',
      fetch: async () =>
        new Response(JSON.stringify({ error: { type: 'server_error', code: 'server_error', param: null, message: 'm' } }), {
          status: 400,
          headers: json,
        }),
    });
    const thrown = await generateText({ model: openai.responses('gpt-5'), prompt: 'hi', maxRetries: 0 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    const classification = classifyModelError(thrown, context);
    expect(classification.kind).toBe('fatal');
    expect(ModelRequestRejectedError.isInstance((classification as { error: unknown }).error)).toBe(true);
  });
});

describe('callWithPolicy on a Responses API server_error reported in a 200 answer', () => {
  const dependencies = {
    now: () => 0,
    sleep: async () => undefined,
    startTimer: () => () => undefined,
    random: () => 0,
  };
  const serverError = { body: { error: { code: 'server_error', message: 'The server had an error' } } };
  const success = {
    body: {
      id: 'r',
      object: 'response',
      created_at: 0,
      status: 'completed',
      model: 'gpt-5',
      output: [
        {
          type: 'message',
          id: 'm',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'done', annotations: [] }],
        },
      ],
      usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
    },
  };

  it('asks again and takes the answer that follows', async () => {
    const { model, calls } = modelAnswering([serverError, success]);
    const result = await callWithPolicy((signal) => generateText({ model, prompt: 'hi', maxRetries: 0, abortSignal: signal }), {
      provider: 'openai',
      policy: DEFAULT_CALLING_POLICY,
      dependencies,
    });
    expect(result.text).toBe('done');
    expect(calls()).toBe(2);
  });

  it('fails ModelUnavailable when the retry budget runs out', async () => {
    const { model, calls } = modelAnswering([serverError]);
    const error = await callWithPolicy((signal) => generateText({ model, prompt: 'hi', maxRetries: 0, abortSignal: signal }), {
      provider: 'openai',
      policy: { ...DEFAULT_CALLING_POLICY, maxAttempts: 3 },
      dependencies,
    }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(ModelUnavailableError.isInstance(error)).toBe(true);
    expect(calls()).toBe(3);
  });
});
