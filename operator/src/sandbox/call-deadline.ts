// Bounds a pending answer by the caller's AbortSignal and timeout, so a hung toolbox can never
// hold a worker forever. `giveUp` lets the protocol forget (or kill) what it was waiting on.
import type { CallOptions } from './sandbox.ts';
import { SandboxError } from './sandbox-error.ts';

export function withDeadline<T>(
  work: Promise<T>,
  options: CallOptions,
  defaultTimeoutMs: number,
  giveUp: (error: SandboxError) => void,
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
  const signal = options.signal;
  if (signal?.aborted) {
    const error = new SandboxError('ABORTED', 'the tool call was aborted', { cause: signal.reason });
    // Nobody waits for the work any more, and giving up (killing the toolbox) makes it fail:
    // unheeded, that rejection would be unhandled and end the process. A real node showed it:
    // the exec opened after the caller had aborted.
    work.catch(() => undefined);
    giveUp(error);
    return Promise.reject(error);
  }
  return new Promise<T>((resolve, reject) => {
    const stop = (error: SandboxError) => {
      cleanup();
      giveUp(error);
      reject(error);
    };
    const onAbort = () => stop(new SandboxError('ABORTED', 'the tool call was aborted', { cause: signal?.reason }));
    const timer = setTimeout(() => stop(new SandboxError('TIMEOUT', `the toolbox did not answer within ${timeoutMs} ms`)), timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        cleanup();
        resolve(value);
      },
      (error: unknown) => {
        cleanup();
        reject(error);
      },
    );
  });
}
