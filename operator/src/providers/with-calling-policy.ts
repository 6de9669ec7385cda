// Wraps any LanguageModelV4 so every doGenerate/doStream runs under the calling policy. Use
// it with `maxRetries: 0` in generateText/streamText, so the SDK's own retry loop does not
// multiply ours and our typed errors reach the caller unchanged.
//
// Streams: the request until the response headers is retried like doGenerate. After that,
// parts may already have reached the caller, so a stream is never retried; the attempt
// timeout still applies to the whole stream and ends it with a ModelTimeoutError.

import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { wrapLanguageModel } from 'ai';
import { callWithPolicy, type CallWithPolicyOptions } from './call-with-policy.ts';
import { ModelTimeoutError } from './errors/model-timeout-error.ts';

export type WithCallingPolicyOptions = Omit<CallWithPolicyOptions, 'abortSignal' | 'provider'> & {
  /** Provider name for messages; defaults to the model's provider id without the SDK's ".chat"/".responses" suffix. */
  readonly provider?: string;
};

export function withCallingPolicy(model: LanguageModelV4, options: WithCallingPolicyOptions): LanguageModelV4 {
  const provider = options.provider ?? model.provider.split('.')[0] ?? model.provider;
  const policyFor = (callOptions: LanguageModelV4CallOptions): CallWithPolicyOptions => ({
    ...options,
    provider,
    abortSignal: callOptions.abortSignal,
  });
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v4',
      // The policy calls the model once an attempt, each with the attempt's own signal, so these
      // call `model` with it rather than the doGenerate/doStream the middleware is handed, which
      // always pass the caller's options as they came.
      wrapGenerate: ({ params: callOptions }) =>
        callWithPolicy((signal) => model.doGenerate({ ...callOptions, abortSignal: signal }), policyFor(callOptions)),
      wrapStream: ({ params: callOptions }) =>
        callWithPolicy(async (attemptSignal) => {
          // The attempt signal only governs the request; once headers arrived the stream gets
          // its own controller so the policy finishing this attempt does not cut the body.
          const streamController = new AbortController();
          const abortStream = (reason: unknown) => streamController.abort(reason);
          const onAttemptAbort = () => abortStream(attemptSignal.reason);
          attemptSignal.addEventListener('abort', onAttemptAbort, { once: true });
          const onCallerAbort = () => abortStream(callOptions.abortSignal?.reason);
          callOptions.abortSignal?.addEventListener('abort', onCallerAbort, { once: true });
          const startedAt = options.dependencies.now();
          let result;
          try {
            result = await model.doStream({ ...callOptions, abortSignal: streamController.signal });
          } finally {
            attemptSignal.removeEventListener('abort', onAttemptAbort);
          }
          const remainingMs = Math.max(0, options.policy.attemptTimeoutMs - (options.dependencies.now() - startedAt));
          const stream = boundStreamDuration(result.stream, {
            remainingMs,
            startTimer: options.dependencies.startTimer,
            timeoutError: () => new ModelTimeoutError({ provider, timeoutMs: options.policy.attemptTimeoutMs }),
            abort: abortStream,
            done: () => callOptions.abortSignal?.removeEventListener('abort', onCallerAbort),
          });
          return { ...result, stream };
        }, policyFor(callOptions)),
    },
  });
}

function boundStreamDuration(
  source: ReadableStream<LanguageModelV4StreamPart>,
  options: {
    remainingMs: number;
    startTimer: (ms: number, callback: () => void) => () => void;
    timeoutError: () => ModelTimeoutError;
    abort: (reason: unknown) => void;
    done: () => void;
  },
): ReadableStream<LanguageModelV4StreamPart> {
  const reader = source.getReader();
  let cancelTimer: () => void = () => undefined;
  return new ReadableStream<LanguageModelV4StreamPart>({
    start(controller) {
      cancelTimer = options.startTimer(options.remainingMs, () => {
        const error = options.timeoutError();
        controller.error(error);
        options.abort(error);
        reader.cancel(error).catch(() => undefined);
        options.done();
      });
    },
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          cancelTimer();
          options.done();
          controller.close();
        } else {
          controller.enqueue(value);
        }
      } catch (error) {
        cancelTimer();
        options.done();
        try {
          controller.error(error);
        } catch {
          // already errored by the timeout
        }
      }
    },
    cancel(reason) {
      cancelTimer();
      options.done();
      return reader.cancel(reason);
    },
  });
}
