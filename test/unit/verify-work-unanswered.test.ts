// A check the sandbox never answers is a failed check, not a broken sandbox. A check (or code the
// model wrote that it imports) can run `kill -STOP $PPID` and stop the toolbox: sandbox.call then
// throws SandboxError('TIMEOUT') past the check's timeout and the answer grace. Thrown on, it
// made finalize retry ten times, each cloning and running the check again in a worker slot
// every namespace shares, and the run ended SandboxLost: a check that is not required failed
// the run, and retries never handed the failure back to the model. Only TIMEOUT is a verdict:
// a dropped transport or a closed sandbox says nothing about the work, and is retried as before.
import { describe, expect, it } from 'vitest';
import { emptyUsage } from '../../operator/src/agent/usage-accounting.ts';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { SandboxError, type SandboxErrorReason } from '../../operator/src/sandbox/sandbox-error.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { verifyWork } from '../../operator/src/workers/verify-work.ts';

const NOW = Date.parse('2030-01-01T12:00:00Z');

interface Scene {
  readonly required: boolean;
  readonly retries: number;
  /** What the sandbox's call throws; TIMEOUT unless told. */
  readonly reason?: SandboxErrorReason;
  /** The error says the request was never written to the toolbox. */
  readonly neverSent?: boolean;
  /** The state as saved by an earlier try of this finalize. */
  readonly state?: RunState;
}

function runOf(scene: Scene): ParsedCodingRun {
  return {
    metadata: { name: 'r', namespace: 'team', uid: 'uid-1' },
    spec: {
      budget: { maxSteps: 40, timeout: '1h' },
      verify: { command: 'npm test', required: scene.required, retries: scene.retries, protect: [], timeout: '10m' },
    },
  } as unknown as ParsedCodingRun;
}

const startingState = (): RunState =>
  ({
    step: 3,
    discardedModelCalls: 0,
    usage: emptyUsage(),
    startedAt: NOW - 60_000,
    messages: [{ role: 'assistant', content: 'done' }],
    finalText: 'done',
    stage: 'finalizing',
  }) as unknown as RunState;

async function verifyUnanswered(scene: Scene) {
  const run = runOf(scene);
  const state = scene.state ?? startingState();
  const enqueued: number[] = [];
  const events: { type: string; reason: string; message: string }[] = [];
  const saved: RunState[] = [];
  const transcript: unknown[] = [];
  const calls: { timeoutMs?: number }[] = [];
  const deps = {
    sandboxes: {
      for: () => ({
        call: async (_request: unknown, options: { timeoutMs?: number }) => {
          calls.push(options);
          throw new SandboxError(scene.reason ?? 'TIMEOUT', `the toolbox did not answer within ${options.timeoutMs} ms`, {
            ...(scene.neverSent ? { written: false as const } : {}),
          });
        },
      }),
    },
    transcript: { append: async (_run: unknown, entries: unknown[]) => void transcript.push(...entries) },
    states: { save: async (saving: RunState) => void saved.push(structuredClone(saving)) },
    events: { record: async (_run: unknown, event: { type: string; reason: string; message: string }) => void events.push(event) },
    queue: { step: async (_ref: unknown, step: number) => void enqueued.push(step) },
    metrics: { namespaceTokensToday: { set: () => {} } },
    logger: { info: () => {}, warn: () => {}, error: () => {} },
    now: () => new Date(NOW),
  } as unknown as AgentDependencies;
  const outcome = await verifyWork(deps, run, state);
  return { outcome, state, enqueued, events, saved, transcript, calls };
}

describe('a check the sandbox does not answer is a failed check', () => {
  it('fails a required run VerificationFailed at once, saying the sandbox did not answer', async () => {
    const { outcome, state, enqueued, events, saved, calls } = await verifyUnanswered({ required: true, retries: 0 });
    expect(outcome).toBe('done');
    expect(enqueued).toEqual([]);
    expect(calls).toEqual([{ timeoutMs: 600_000 + 60_000 }]);
    expect(state.stop).toMatchObject({ reason: 'VerificationFailed' });
    expect(state.stop!.message).toMatch(/`npm test` got no answer from the sandbox/);
    // Not the command's own timeout: raising spec.verify.timeout would not help.
    expect(state.stop!.message).not.toMatch(/raise spec\.verify\.timeout/);
    expect(state.verification).toMatchObject({ passed: false, timedOut: true, attempts: 1, step: 3 });
    expect(state.verification).not.toHaveProperty('exitCode');
    expect(state.verification!.outputTail).toBe('the sandbox did not answer within 660 s (a process may have stopped the toolbox)');
    expect(saved).toHaveLength(1);
    expect(events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'VerificationFailed' })]);
  });

  it('lets a run whose check is not required succeed with the failure noted', async () => {
    const { outcome, state, enqueued } = await verifyUnanswered({ required: false, retries: 0 });
    expect(outcome).toBe('done');
    expect(enqueued).toEqual([]);
    expect(state.stop).toBeUndefined();
    expect(state.verificationNote).toMatch(/^Verification failed but is not required: `npm test` got no answer from the sandbox/);
  });

  it('hands the failure back to the model while it has retries, with what happened', async () => {
    const { outcome, state, enqueued, transcript } = await verifyUnanswered({ required: true, retries: 2 });
    expect(outcome).toBe('again');
    expect(enqueued).toEqual([3]);
    expect(state.stage).toBe('stepping');
    expect(state.stop).toBeUndefined();
    const prompt = state.messages.at(-1) as { role: string; content: string };
    expect(prompt.role).toBe('user');
    expect(prompt.content).toMatch(/`npm test`, and it got no answer from the sandbox/);
    expect(prompt.content).toMatch(/the sandbox did not answer within 660 s \(a process may have stopped the toolbox\)/);
    expect(transcript).toEqual([
      expect.objectContaining({
        kind: 'verify',
        verification: expect.objectContaining({ passed: false, timedOut: true, verdict: 'retry' }),
      }),
    ]);
  });

  it('says so when the check was never sent to the toolbox', async () => {
    const { state } = await verifyUnanswered({ required: true, retries: 0, neverSent: true });
    expect(state.verification!.outputTail).toBe(
      'the sandbox did not answer within 660 s (a process may have stopped the toolbox); the check was never sent to it',
    );
  });

  it('keeps the saved verdict when the finalize is redone after a crash, without running the check again', async () => {
    const first = await verifyUnanswered({ required: false, retries: 0 });
    const redone = await verifyUnanswered({ required: false, retries: 0, state: structuredClone(first.saved[0]!) });
    expect(redone.outcome).toBe('done');
    expect(redone.calls).toEqual([]);
    expect(redone.state.verificationNote).toBe(first.state.verificationNote);
  });

  it.each<SandboxErrorReason>(['TRANSPORT', 'PROTOCOL', 'CLOSED', 'ABORTED', 'RESPONSE_TOO_LARGE'])(
    'throws a %s SandboxError on, so the finalize is retried as before',
    async (reason) => {
      await expect(verifyUnanswered({ required: true, retries: 0, reason })).rejects.toMatchObject({ name: 'SandboxError', reason });
    },
  );
});
