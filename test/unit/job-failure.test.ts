// Table test of workers/job-failure.ts, the one place that maps what an agent job threw to
// the run's fate: fail it now (with which reason and message), finalize it (the deadline
// keeps the partial diff), or let BullMQ try again.
import { describe, expect, it } from 'vitest';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import { ModelAnswerUnusableError } from '../../operator/src/providers/errors/model-answer-unusable-error.ts';
import { ModelAuthFailedError } from '../../operator/src/providers/errors/model-auth-failed-error.ts';
import { ModelUnavailableError } from '../../operator/src/providers/errors/model-unavailable-error.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import { CancelRequestedError } from '../../operator/src/workers/errors/cancel-requested-error.ts';
import { CANCEL_RECHECK_DELAY_MS, decideJobFailure, type FailedJob } from '../../operator/src/workers/job-failure.ts';

const step = (attempt: number, attempts = 10): FailedJob => ({ name: 'step', attempt, attempts });
const prepare = (attempt: number, attempts = 10): FailedJob => ({ name: 'prepare', attempt, attempts });
const timeout = Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' });
const forbidden = Object.assign(new Error('HTTP-Code: 403 Message: pods/exec is forbidden'), { code: 403 });

describe('decideJobFailure', () => {
  // Retried, a job that found a cancel requested spent its tries in about 90 s and was left, done
  // with: a cancel withdrawn after that lost the step (StateLost) or held an approved call's
  // resume an hour (BullMQ keeps a completed job's id). Failing the run AgentFailed instead would
  // overwrite the cancel the controller is about to end it with.
  it('puts off a job that found a cancel requested, whatever its try, never failing the run nor leaving the job', () => {
    const cancelled = new CancelRequestedError('ask the model');
    for (const job of [step(1), step(9), step(10), { name: 'resume' as const, attempt: 10, attempts: 10 }, prepare(10, 1)]) {
      expect(decideJobFailure(cancelled, job)).toEqual({ action: 'delay', delayMs: CANCEL_RECHECK_DELAY_MS, why: 'CancelRequestedError' });
    }
    expect(CANCEL_RECHECK_DELAY_MS).toBe(15_000);
  });

  it.each([
    [
      'a RunFailure fails the run at once with its reason',
      new RunFailure('CloneFailed', 'no such repo'),
      prepare(1),
      { action: 'fail', reason: 'CloneFailed', message: 'no such repo', modelCallError: false },
    ],
    [
      'a RunFailure from the state store fails StateLost, not counted as a model error',
      new RunFailure('StateLost', 'tampered'),
      step(1),
      { action: 'fail', reason: 'StateLost', message: 'tampered', modelCallError: false },
    ],
    [
      'a provider error (a RunFailure subclass) fails at once and counts as a model call error',
      new ModelAuthFailedError({ provider: 'openai', statusCode: 401 }),
      step(1),
      { action: 'fail', reason: 'ModelAuthFailed', modelCallError: true },
    ],
    [
      // It used to be retried as a transport error: ten tries, each asking the model again, then AgentFailed.
      'a model answer the SDK failed on fails ModelResponseInvalid at once, counted as a model call error',
      new ModelAnswerUnusableError({ provider: 'openai-compatible', step: 3, cause: new RangeError('Maximum call stack size exceeded') }),
      step(1),
      {
        action: 'fail',
        reason: 'ModelResponseInvalid',
        message: expect.stringContaining('(RangeError: Maximum call stack size exceeded)'),
        modelCallError: true,
      },
    ],
    [
      'retries spent by the provider fail ModelUnavailable',
      new ModelUnavailableError({ provider: 'openai', attempts: 5, lastProblem: 'HTTP 503' }),
      step(1),
      { action: 'fail', reason: 'ModelUnavailable', modelCallError: true },
    ],
    [
      'a re-checked endpoint or Secret counts as a model call error (Security #11.3)',
      new RunFailure('SecretNotAllowed', 'label removed'),
      step(1),
      { action: 'fail', reason: 'SecretNotAllowed', modelCallError: true },
    ],
    [
      'the deadline during a step finalizes (the partial diff is kept)',
      timeout,
      step(1),
      { action: 'finalize', stop: { reason: 'DeadlineExceeded' } },
    ],
    ['a timeout outside a step is a transport error: retried', timeout, prepare(1), { action: 'retry' }],
    ['a dropped exec is retried while tries are left', new SandboxError('TRANSPORT', 'exec closed'), step(9), { action: 'retry' }],
    [
      'a dropped exec on the last try fails SandboxLost',
      new SandboxError('TRANSPORT', 'exec closed'),
      step(10),
      { action: 'fail', reason: 'SandboxLost', message: 'The step job failed 10 times: exec closed', modelCallError: false },
    ],
    [
      'any other error on the last try fails AgentFailed',
      new Error('ECONNRESET'),
      prepare(10),
      { action: 'fail', reason: 'AgentFailed', message: 'The prepare job failed 10 times: ECONNRESET' },
    ],
    ['a forbidden request gets only a few tries', forbidden, prepare(3), { action: 'retry' }],
    ['a forbidden request fails on its fourth try and names the RBAC', forbidden, prepare(4), { action: 'fail', reason: 'AgentFailed' }],
    [
      'an error that only looks like a RunFailure (a reason field) is not one',
      Object.assign(new Error('x'), { reason: 'ModelAuthFailed' }),
      step(1),
      { action: 'retry' },
    ],
  ] as const)('%s', (_name, error, job, expected) => {
    expect(decideJobFailure(error, job)).toMatchObject(expected);
  });

  // Security #11.3: what a model endpoint answered never reaches status; an SDK error's message may quote it.
  it("names an SDK error on a model answer by its name only, but a RangeError by the engine's own words", () => {
    const quoting = new ModelAnswerUnusableError({
      provider: 'openai',
      step: 2,
      cause: new TypeError("Cannot read 'http://10.0.0.1/admin'"),
    });
    expect(quoting.message).toContain('could not be worked on (TypeError)');
    expect(quoting.message).not.toContain('10.0.0.1');
    const overflow = new ModelAnswerUnusableError({
      provider: 'openai',
      step: 2,
      cause: new RangeError('Maximum call stack size exceeded'),
    });
    expect(overflow.message).toContain('(RangeError: Maximum call stack size exceeded)');
  });

  it('the forbidden message says what to fix', () => {
    const decision = decideJobFailure(forbidden, prepare(4));
    expect(decision.action === 'fail' && decision.message).toContain("The operator's ServiceAccount is forbidden to do this");
  });
});
