// Which provider refusals mean "over the context window" (the worker compacts and asks again)
// and which are other rejections (the run fails ModelRequestRejected).
import { createOpenAI } from '@ai-sdk/openai';
import { APICallError, generateText } from 'ai';
import { describe, expect, it } from 'vitest';
import { classifyModelError } from '../../operator/src/providers/classify-model-error.ts';
import { isContextOverflow, ModelContextTooLongError } from '../../operator/src/providers/errors/model-context-too-long-error.ts';
import { ModelRequestRejectedError } from '../../operator/src/providers/errors/model-request-rejected-error.ts';

const body = (error: object) => JSON.stringify({ error });

describe('isContextOverflow', () => {
  const cases: Array<[string, number, string | undefined, boolean]> = [
    ['OpenAI code', 400, body({ code: 'context_length_exceeded', message: 'x' }), true],
    [
      'OpenAI-compatible message',
      400,
      body({ message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens." }),
      true,
    ],
    ['Anthropic', 400, body({ type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' }), true],
    ['llama.cpp / vLLM', 400, body({ message: 'the request exceeds the available context size, try increasing the context window' }), true],
    ['413 request too large', 413, body({ code: 'request_too_large', message: 'Request too large' }), true],
    ['another 400', 400, body({ message: 'Unknown model fake-coder' }), false],
    ['a 404 that mentions context', 404, body({ message: 'maximum context length' }), false],
    ['not JSON', 400, 'maximum context length', false],
    ['no body', 400, undefined, false],
  ];
  for (const [name, status, responseBody, expected] of cases) {
    it(`${name}: ${expected}`, () => expect(isContextOverflow(status, responseBody)).toBe(expected));
  }
});

describe('classifyModelError', () => {
  const rejected = (status: number, responseBody: string) =>
    classifyModelError(
      new APICallError({
        message: 'rejected',
        url: 'http://x',
        requestBodyValues: {},
        statusCode: status,
        responseBody,
        isRetryable: false,
      }),
      { provider: 'openai', now: 0, secrets: [] },
    );

  it('makes a context overflow a ModelContextTooLongError, still a rejected request', () => {
    const classification = rejected(400, body({ code: 'context_length_exceeded', message: 'too long' }));
    expect(classification.kind).toBe('fatal');
    const error = (classification as { error: unknown }).error;
    expect(ModelContextTooLongError.isInstance(error)).toBe(true);
    expect(ModelRequestRejectedError.isInstance(error)).toBe(true);
  });

  it('leaves other rejections as they were', () => {
    const error = (rejected(400, body({ message: 'Unknown model' })) as { error: unknown }).error;
    expect(ModelRequestRejectedError.isInstance(error)).toBe(true);
    expect(ModelContextTooLongError.isInstance(error)).toBe(false);
  });
});

// The Responses API can report a failure inside a 200 answer: `{"error":{...}}`, or a response
// whose status is failed with its `error`; streamed, a `response.failed` event. The SDK hands
// that error on as an object (responseBody, data) or, when its schema does not take the body,
// as the parsed value of a TypeValidationError cause. Read as a string it was "[object Object]",
// and a context overflow was not compacted: the run failed.
describe('classifyModelError on an error the endpoint sent as an object', () => {
  const overflow = { code: 'context_length_exceeded', message: 'Your input exceeds the context window of this model.' };
  const context = { provider: 'openai', now: 0, secrets: [] };

  /** What classifyModelError makes of what a Responses model throws for a 200 answer of `body`. */
  async function answered(body: object) {
    const openai = createOpenAI({
      apiKey: 'k',
      fetch: async () => new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } }),
    });
    const thrown = await generateText({ model: openai.responses('gpt-5'), prompt: 'hi', maxRetries: 0 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    return classifyModelError(thrown, context);
  }
  const errorOf = (classification: ReturnType<typeof classifyModelError>) =>
    classification.kind === 'fatal' ? classification.error : undefined;

  it.each([
    [
      'an error with a type (the SDK passes the body on as an object)',
      { error: { ...overflow, type: 'invalid_request_error', param: null } },
    ],
    ['an error with code and message only', { error: overflow }],
    ['a failed response', { id: 'r', object: 'response', status: 'failed', error: overflow, output: [] }],
  ])('makes %s over the context window a ModelContextTooLongError', async (_name, body) => {
    const error = errorOf(await answered(body));
    expect(ModelContextTooLongError.isInstance(error)).toBe(true);
    // Read for its meaning, never quoted: a 200 answer's words are not an HTTP error's.
    expect((error as Error).message).not.toContain('Your input exceeds');
  });

  it('keeps another error a rejection, without quoting the answer', async () => {
    const error = errorOf(
      await answered({ error: { code: 'invalid_prompt', message: 'Invalid prompt: flagged', type: 'invalid_request_error' } }),
    );
    expect(ModelRequestRejectedError.isInstance(error)).toBe(true);
    expect(ModelContextTooLongError.isInstance(error)).toBe(false);
    expect((error as Error).message).not.toContain('Invalid prompt: flagged');
    expect((error as Error).message).toContain('the endpoint reported a failure in its answer');
    expect((error as Error).message).not.toContain('[object Object]');
  });

  const streamed = (frame: object, where: 'responseBody' | 'data' | 'cause') => {
    const inner = new APICallError({
      message: 'failed',
      url: 'http://x',
      requestBodyValues: {},
      statusCode: 400,
      ...(where === 'responseBody' ? { responseBody: JSON.stringify(frame) } : { data: frame }),
      isRetryable: false,
    });
    return where === 'cause'
      ? new APICallError({ message: 'failed', url: 'http://x', requestBodyValues: {}, statusCode: 400, cause: inner, isRetryable: false })
      : inner;
  };
  it.each([
    [
      'a response.failed event, as text',
      streamed({ type: 'response.failed', response: { status: 'failed', error: overflow } }, 'responseBody'),
    ],
    ['a response.failed event, as data', streamed({ type: 'response.failed', response: { status: 'failed', error: overflow } }, 'data')],
    ['an error event with its code on it', streamed({ type: 'error', sequence_number: 0, ...overflow }, 'responseBody')],
    ['an error in the cause', streamed({ error: overflow }, 'cause')],
  ])('reads the error of %s', (_name, thrown) => {
    expect(ModelContextTooLongError.isInstance(errorOf(classifyModelError(thrown, context)))).toBe(true);
  });
});

// The header of classify-model-error.ts: the operator must not be a reflecting proxy. Point
// baseURL at an internal JSON service on an allowed host, and whatever its answer says in a
// shape the classifier reads for meaning (`response.error`, an `error` event, a 200 answer) must
// not reach the run's status; only an HTTP error's top-level error.message is shown, as before.
describe('classifyModelError quotes only an HTTP error body’s error.message', () => {
  const context = { provider: 'openai', now: 0, secrets: [] };
  const page = 'INTERNAL-PAGE-CONTENT account 4242';
  const thrownFor = (statusCode: number, body: object) =>
    new APICallError({
      message: 'failed',
      url: 'http://x',
      requestBodyValues: {},
      statusCode,
      responseBody: JSON.stringify(body),
      isRetryable: false,
    });
  const messageOf = (thrown: unknown) => {
    const classified = classifyModelError(thrown, context);
    return classified.kind === 'fatal' ? classified.error.message : classified.kind === 'transient' ? classified.problem : '';
  };

  it.each([
    ['an error event shape on a 404', thrownFor(404, { type: 'error', message: page })],
    ['a response.error on a 404', thrownFor(404, { response: { error: { message: page } } })],
  ])('does not quote %s', (_name, thrown) => {
    expect(messageOf(thrown)).not.toContain(page);
  });

  it('does not quote an error reported in a 200 answer', async () => {
    const openai = createOpenAI({
      apiKey: 'k',
      fetch: async () =>
        new Response(JSON.stringify({ type: 'error', message: page, error: { message: page } }), {
          status: 200,
          headers: { 'content-type': 'application/json' },
        }),
    });
    const thrown = await generateText({ model: openai.responses('gpt-5'), prompt: 'hi', maxRetries: 0 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(messageOf(thrown)).not.toContain(page);
  });

  it('still quotes the top-level error.message of an HTTP error', () => {
    expect(messageOf(thrownFor(400, { error: { message: 'model not found: gpt-9' } }))).toContain('model not found: gpt-9');
  });
});
