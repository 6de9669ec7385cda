// Decides what a failed model call means for the run: give up now (auth, a bad request, an
// answer that is not a model response), try again (rate limits, overload, network), or not a
// provider failure at all.

import { APICallError, JSONParseError, TypeValidationError } from 'ai';
import { ModelAuthFailedError } from './errors/model-auth-failed-error.ts';
import { ModelRequestRejectedError } from './errors/model-request-rejected-error.ts';
import { ModelResponseInvalidError } from './errors/model-response-invalid-error.ts';
import { ModelTimeoutError } from './errors/model-timeout-error.ts';
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
        ? { kind: 'transient', problem: `network error: ${redactSecrets(error.message, context.secrets)}`, statusCode: undefined, retryAfterMs: undefined }
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
    return {
      kind: 'fatal',
      error: new ModelRequestRejectedError({
        provider: context.provider,
        statusCode: status,
        detail: boundDetail(redactSecrets(providerErrorDetail(error), context.secrets)),
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
  context: { provider: string; secrets: readonly (string | undefined)[] },
): ModelErrorClassification {
  const cause = error.cause;
  const parseProblem = JSONParseError.isInstance(cause)
    ? 'the body is not JSON'
    : TypeValidationError.isInstance(cause)
      ? 'the JSON does not have the shape of a model response'
      : undefined;
  if (parseProblem === undefined && isNetworkCutOff(cause)) {
    return { kind: 'transient', problem: `the answer was cut off (${(cause as Error).message})`, statusCode: undefined, retryAfterMs: undefined };
  }
  const what = parseProblem ?? (cause instanceof Error ? cause.message : error.message);
  const start = error.responseBody?.slice(0, 120);
  const body = start === undefined ? '' : ` (it starts: ${boundDetail(start)}${start.length < error.responseBody!.length ? '…' : ''})`;
  return {
    kind: 'fatal',
    error: new ModelResponseInvalidError({
      provider: context.provider,
      statusCode: status,
      detail: boundDetail(redactSecrets(`${what}${body}`, context.secrets)),
      cause: error,
    }),
  };
}

/** undici ends a body the peer cut with TypeError("terminated") or a socket error. */
function isNetworkCutOff(cause: unknown): boolean {
  return cause instanceof TypeError || (cause instanceof Error && /ECONNRESET|EPIPE|socket hang up|other side closed/i.test(cause.message));
}

/** OpenAI-style bodies carry {"error":{"message":...}}; fall back to the SDK's message. */
function providerErrorDetail(error: APICallError): string {
  if (error.responseBody !== undefined) {
    try {
      const body = JSON.parse(error.responseBody) as { error?: { message?: unknown } | string; message?: unknown };
      if (typeof body.error === 'string') return body.error;
      if (typeof body.error?.message === 'string') return body.error.message;
      if (typeof body.message === 'string') return body.message;
    } catch {
      // not JSON: use the SDK message below
    }
  }
  return error.message;
}

function boundDetail(detail: string): string {
  const oneLine = detail.replace(/\s+/g, ' ').trim();
  return oneLine.length > DETAIL_LIMIT ? `${oneLine.slice(0, DETAIL_LIMIT)}…` : oneLine;
}

// undici reports refused/reset connections as TypeError('fetch failed') with a cause.
function isNetworkTypeError(error: unknown): boolean {
  return error instanceof TypeError && /fetch failed|failed to fetch/i.test(error.message);
}
