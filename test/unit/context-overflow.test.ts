// Which provider refusals mean "over the context window" (the worker compacts and asks again)
// and which are other rejections (the run fails ModelRequestRejected).
import { APICallError } from 'ai';
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
