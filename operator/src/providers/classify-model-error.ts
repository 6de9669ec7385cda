// Decides what a failed model call means for the run: give up now (auth, a bad request, an
// answer that is not a model response), try again (rate limits, overload, network), or not a
// provider failure at all.
//
// Security #11.3: what an endpoint answers goes into status.message, which the run author
// reads. Quoting the body made the operator a reflecting proxy (point baseURL at an internal
// page, read the page in the run's status). So the only text taken from an answer is a JSON
// provider error's `error.message`, bounded and stripped of control characters; any other
// body, and the HTTP reason phrase, reflect nothing but the status code. The provider error is
// read as an object wherever the SDK put it (providerErrorOf), for what it means only (its
// words are shown only from an HTTP error's body, providerErrorMessage): a 200 answer or a
// streamed event reports one too, and its code is what says the context window was exceeded, or that the
// provider was busy or broke (TRANSIENT_REPORTED_CODES: tried again like a 5xx or 429).

import { APICallError, InvalidResponseDataError, JSONParseError, TypeValidationError } from 'ai';
import { ModelAuthFailedError } from './errors/model-auth-failed-error.ts';
import { isContextOverflow, ModelContextTooLongError } from './errors/model-context-too-long-error.ts';
import { ModelRequestRejectedError } from './errors/model-request-rejected-error.ts';
import { ModelResponseInvalidError } from './errors/model-response-invalid-error.ts';
import { ModelTimeoutError } from './errors/model-timeout-error.ts';
import { ModelResponseTooLargeError, ModelResponseTooManyItemsError } from './limit-response-size.ts';
import { redactSecrets } from './redact-secrets.ts';
import { retryAfterMs } from './retry-after.ts';

export type ModelErrorClassification =
  | { readonly kind: 'fatal'; readonly error: ModelAuthFailedError | ModelRequestRejectedError | ModelResponseInvalidError }
  | {
      readonly kind: 'transient';
      readonly problem: string;
      readonly statusCode: number | undefined;
      readonly retryAfterMs: number | undefined;
    }
  /** Not a provider failure we understand (a bug, a cancelled call): passed on unchanged. */
  | { readonly kind: 'unknown' };

// 408 request timeout, 409 conflict (OpenAI uses it for transient lock contention),
// 425 too early, 429 rate limited; every 5xx.
const TRANSIENT_CLIENT_STATUSES = new Set([408, 409, 425, 429]);
// The codes (or types) of an error reported in a 200 answer that mean "ask again later", as a
// 5xx or 429 would: the Responses API documents server_error, rate_limit_exceeded and
// vector_store_timeout for `error.code`; the rest are what OpenAI and compatible servers put in
// `type` or `code` of a busy or broken server's error (the SDK's own reading of a streamed error
// makes each of them a 429, 5xx or 504). insufficient_quota is not here: the quota stays spent.
const TRANSIENT_REPORTED_CODES: ReadonlySet<string> = new Set([
  'server_error',
  'rate_limit_exceeded',
  'overloaded',
  'server_is_overloaded',
  'internal_error',
  'vector_store_timeout',
]);
const DETAIL_LIMIT = 300;

export function classifyModelError(
  error: unknown,
  context: { provider: string; now: number; secrets: readonly (string | undefined)[] },
): ModelErrorClassification {
  if (ModelTimeoutError.isInstance(error)) {
    return { kind: 'transient', problem: error.message, statusCode: undefined, retryAfterMs: undefined };
  }
  if (APICallError.isInstance(error)) {
    const status = error.statusCode;
    if (status === undefined) {
      // No HTTP answer at all: the SDK marks connection failures retryable.
      return error.isRetryable
        ? {
            kind: 'transient',
            problem: `network error: ${redactSecrets(error.message, context.secrets)}`,
            statusCode: undefined,
            retryAfterMs: undefined,
          }
        : { kind: 'unknown' };
    }
    if (status >= 200 && status < 300) return classifyUnusableAnswer(error, status, context);
    if (status === 401 || status === 403) {
      return { kind: 'fatal', error: new ModelAuthFailedError({ provider: context.provider, statusCode: status, cause: error }) };
    }
    if (status >= 500 || TRANSIENT_CLIENT_STATUSES.has(status)) {
      return {
        kind: 'transient',
        problem: `HTTP ${status}`,
        statusCode: status,
        retryAfterMs: retryAfterMs(error.responseHeaders, context.now),
      };
    }
    // The SDK makes a failure reported in a 200 answer that its schema takes a 400, with the parsed
    // answer (not the text an HTTP error's body is) as responseBody: a busy server, not a refusal.
    const inAnswer = status === 400 && asRecord(error.responseBody) !== undefined ? providerErrorOf(error) : undefined;
    const busy = inAnswer === undefined ? undefined : transientReported(error, inAnswer, 200, context.now);
    if (busy !== undefined) return busy;
    // A redirect is not followed (without-redirects.ts): the key goes only to the endpoint checked.
    const redirect =
      status >= 300 && status < 400
        ? 'the endpoint answered with a redirect, which the operator does not follow: set spec.model.baseURL to the address it redirects to (allowModelEndpoints must list it)'
        : undefined;
    return rejection(error, status, status, redirect === undefined ? providerErrorOf(error) : undefined, redirect, context);
  }
  // The SDK found the 200 answer parsed but unusable inside the provider (a chat completion with
  // no choices): what the endpoint says, and would say again. Passed on as unknown, it was
  // retried as a transport error, ten paid calls. Its message may quote the answer: not shown.
  if (InvalidResponseDataError.isInstance(error)) {
    return {
      kind: 'fatal',
      error: new ModelResponseInvalidError({
        provider: context.provider,
        statusCode: 200,
        detail: 'the JSON is not a usable model response (the SDK could not read an answer from it)',
        cause: error,
      }),
    };
  }
  if (isNetworkTypeError(error)) {
    return { kind: 'transient', problem: `network error: ${(error as Error).message}`, statusCode: undefined, retryAfterMs: undefined };
  }
  return { kind: 'unknown' };
}

/**
 * The SDK throws an APICallError with a 2xx status only when it could not use the answer.
 * Cut off mid-body is the network's fault and worth another try; anything else (not JSON,
 * the wrong shape, too large) is what the endpoint really says, and would say again.
 */
function classifyUnusableAnswer(
  error: APICallError,
  status: number,
  context: { provider: string; now: number; secrets: readonly (string | undefined)[] },
): ModelErrorClassification {
  const cause = error.cause;
  // A failure reported in a 200 answer (the Responses API's `{"error":{...}}`, a response whose
  // status is failed) that the SDK's schema did not take: a rejection, as the SDK makes the same
  // answer when its schema takes it (an APICallError of status 400); tried again when its code
  // says the provider was busy or broke (transientReported), as the same 400 is.
  const reported = TypeValidationError.isInstance(cause) ? providerErrorOf(error) : undefined;
  if (reported !== undefined) {
    return transientReported(error, reported, status, context.now) ?? rejection(error, status, 400, reported, undefined, context);
  }
  const parseProblem = JSONParseError.isInstance(cause)
    ? 'the body is not JSON'
    : TypeValidationError.isInstance(cause)
      ? 'the JSON does not have the shape of a model response'
      : undefined;
  if (parseProblem === undefined && isNetworkCutOff(cause)) {
    return {
      kind: 'transient',
      problem: `the answer was cut off (${(cause as Error).message})`,
      statusCode: undefined,
      retryAfterMs: undefined,
    };
  }
  // Our own size bound says what happened in its own words; any other cause's message may
  // quote the body (JSON.parse's SyntaxError does), so it is not shown.
  const ownBound = ModelResponseTooLargeError.isInstance(cause) || ModelResponseTooManyItemsError.isInstance(cause);
  const what = parseProblem ?? (ownBound ? (cause as Error).message : 'the body is not a model response');
  return {
    kind: 'fatal',
    error: new ModelResponseInvalidError({ provider: context.provider, statusCode: status, detail: what, cause: error }),
  };
}

/** undici ends a body the peer cut with TypeError("terminated") or a socket error. */
function isNetworkCutOff(cause: unknown): boolean {
  return cause instanceof TypeError || (cause instanceof Error && /ECONNRESET|EPIPE|socket hang up|other side closed/i.test(cause.message));
}

/**
 * The request refused: over the context window, the one rejection the worker can cure (compact,
 * ask again), or any other. `meaning` is the status the refusal stands for (400 for a failure
 * reported in a 200 answer); `statusCode` the one the endpoint sent.
 */
function rejection(
  error: APICallError,
  statusCode: number,
  meaning: number,
  reported: ProviderError | undefined,
  redirect: string | undefined,
  context: { provider: string; secrets: readonly (string | undefined)[] },
): ModelErrorClassification {
  const options = {
    provider: context.provider,
    statusCode,
    detail:
      redirect ??
      (statusCode >= 400 ? providerErrorMessage(error.responseBody, context.secrets) : undefined) ??
      (reported !== undefined ? 'the endpoint reported a failure in its answer (its text is shown only from an HTTP error)' : undefined) ??
      'the endpoint gave no JSON error message',
    cause: error,
  };
  // isContextOverflow reads an OpenAI-style body; the error is given in that shape wherever it was found.
  const overflow =
    reported !== undefined &&
    isContextOverflow(meaning, JSON.stringify({ error: { code: reported.code, type: reported.type, message: reported.message } }));
  return { kind: 'fatal', error: overflow ? new ModelContextTooLongError(options) : new ModelRequestRejectedError(options) };
}

/**
 * A failure reported in a 2xx answer whose code (or type) is one of TRANSIENT_REPORTED_CODES:
 * transient, as a 5xx or 429 is, with the answer's Retry-After. The problem names the code from
 * that list, never the provider's text: it goes into status.message when the attempts run out.
 */
function transientReported(
  error: APICallError,
  reported: ProviderError,
  statusCode: number,
  now: number,
): ModelErrorClassification | undefined {
  // The code is the more specific word: `{"type":"server_error","code":"invalid_prompt"}` is a refusal.
  const code = typeof reported.code === 'string' ? reported.code : reported.type;
  if (typeof code !== 'string' || !TRANSIENT_REPORTED_CODES.has(code)) return undefined;
  return {
    kind: 'transient',
    problem: `HTTP ${statusCode} reporting ${code}`,
    statusCode,
    retryAfterMs: retryAfterMs(error.responseHeaders, now),
  };
}

/** What a provider's error object says of itself; each field is checked before it is used. */
interface ProviderError {
  readonly code?: unknown;
  readonly type?: unknown;
  readonly message?: unknown;
}

/**
 * The provider's error object, wherever the SDK put it: the response body as JSON text, or as
 * the parsed object (the Responses model passes on an error in a 200 answer so; read as text it
 * was "[object Object]" and said nothing), `data` (a streamed event), the parsed value a schema
 * refused (TypeValidationError), and the same on the error's causes.
 */
function providerErrorOf(error: unknown, depth = 0): ProviderError | undefined {
  if (depth > 3 || !(error instanceof Error)) return undefined;
  const found = APICallError.isInstance(error)
    ? (errorIn(parsedBody(error.responseBody)) ?? errorIn(error.data))
    : TypeValidationError.isInstance(error)
      ? errorIn(error.value)
      : undefined;
  return found ?? providerErrorOf(error.cause, depth + 1);
}

/** The body as a value: JSON text parsed, an object as it is, undefined for anything else. */
function parsedBody(body: unknown): unknown {
  if (typeof body !== 'string') return body;
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

/**
 * The error in one answer or event: `error` ({"error":{...}}, a failed response), `response.error`
 * (a `response.failed` event), or the event itself when it is an `error` event, which carries
 * code and message on it. Only an object with a string code or message is an error.
 */
function errorIn(value: unknown): ProviderError | undefined {
  const answer = asRecord(value);
  if (answer === undefined) return undefined;
  const candidate = asRecord(answer.error) ?? asRecord(asRecord(answer.response)?.error) ?? (answer.type === 'error' ? answer : undefined);
  return candidate !== undefined && (typeof candidate.message === 'string' || typeof candidate.code === 'string') ? candidate : undefined;
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/**
 * The words status may show: the top-level `error.message` of an HTTP error's body as JSON text
 * ({"error":{"message":...}}), made safe to show (shownMessage). Nothing else: a failure reported
 * in a 200 answer, under `response.error` or as an `error` event is read for what it means
 * (providerErrorOf) but never quoted, or any internal page behind an allowed host that answers
 * 200 `{"type":"error","message":...}` would be read back in the run's status.
 */
export function providerErrorMessage(responseBody: unknown, secrets: readonly (string | undefined)[]): string | undefined {
  if (typeof responseBody !== 'string') return undefined;
  return shownMessage(asRecord(asRecord(parsedBody(responseBody))?.error)?.message, secrets);
}

/**
 * A provider's error message made safe to show: known secrets redacted, control and
 * bidirectional-formatting characters removed, one line, at most DETAIL_LIMIT characters.
 * Undefined for anything but a string with something in it.
 */
function shownMessage(message: unknown, secrets: readonly (string | undefined)[]): string | undefined {
  if (typeof message !== 'string') return undefined;
  const shown = redactSecrets(message, secrets)
    // C0, DEL, C1; then bidi embeddings/overrides/isolates and marks, which reorder what a terminal shows.
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ')
    .replace(/[\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  if (shown === '') return undefined;
  return shown.length > DETAIL_LIMIT ? `${shown.slice(0, DETAIL_LIMIT)}…` : shown;
}

// undici reports refused/reset connections as TypeError('fetch failed') with a cause.
function isNetworkTypeError(error: unknown): boolean {
  return error instanceof TypeError && /fetch failed|failed to fetch/i.test(error.message);
}
