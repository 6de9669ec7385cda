// The provider refused the request because the conversation no longer fits its context window
// (OpenAI's context_length_exceeded, "prompt is too long", ...). Unlike other rejections this
// one the worker can cure: it compacts the conversation and asks once more. Should that still
// not fit, the run fails like any rejected request (ModelRequestRejected).
import { ModelRequestRejectedError } from './model-request-rejected-error.ts';
import { RunFailure } from '../../api/run-failure.ts';

const name = 'ModelContextTooLongError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class ModelContextTooLongError extends ModelRequestRejectedError {
  private readonly [symbol] = true;
  override readonly name: string = name;

  static override isInstance(error: unknown): error is ModelContextTooLongError {
    return RunFailure.hasMarker(error, symbol);
  }
}

// What providers say: OpenAI and compatible servers (code context_length_exceeded, "maximum
// context length"), Anthropic ("prompt is too long"), vLLM/llama.cpp ("context window",
// "exceeds the context"), Gemini ("input token count ... exceeds").
const OVERFLOW_CODES = new Set(['context_length_exceeded', 'string_above_max_length', 'request_too_large']);
const OVERFLOW_MESSAGE =
  /maximum context length|context[_ ]length|context window|prompt is too long|too many (input )?tokens|exceeds? the (model's )?context|input token count/i;

/** Whether a 400/413 answer says the request is over the model's context window. Pure. */
export function isContextOverflow(statusCode: number, responseBody: string | undefined): boolean {
  if (statusCode !== 400 && statusCode !== 413) return false;
  if (responseBody === undefined) return false;
  let error: { code?: unknown; type?: unknown; message?: unknown } | undefined;
  try {
    error = (JSON.parse(responseBody) as { error?: typeof error } | null)?.error;
  } catch {
    return false;
  }
  if (typeof error?.code === 'string' && OVERFLOW_CODES.has(error.code)) return true;
  return typeof error?.message === 'string' && OVERFLOW_MESSAGE.test(error.message);
}
