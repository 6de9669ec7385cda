// A check the sandbox never answers is a failed check, not a broken sandbox. A check (or code the
// model wrote that it imports) can run `kill -STOP $PPID` and stop the toolbox: sandbox.call then
// throws SandboxError('TIMEOUT') past the check's timeout and the answer grace. Thrown on, it
// made finalize retry ten times, each cloning and running the check again in a worker slot
// every namespace shares, and the run ended SandboxLost: a check that is not required failed
// the run, and retries never handed the failure back to the model. Only TIMEOUT is a verdict:
// a dropped transport or a closed sandbox says nothing about the work, and is retried as before.
// And only a TIMEOUT of a check that reached the toolbox, in a sandbox pod that still stands: a
// check never sent did not run, and a pod on a lost node (NotReady, its kubelet hung) gives the
// same TIMEOUT without anything in it having stopped the toolbox. Both are a lost sandbox, retried
// into SandboxLost as before, never a verdict on the work.
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
  /**
   * What the read of the sandbox pod says (AgentDependencies.sandboxLost): 'standing', why it is
   * lost, or an Error the read throws; absent, the dependency is not there (local mode).
   */
  readonly pod?: 'standing' | { lost: string } | Error;
  /** Collects the uid of each run whose sandbox pod was read. */
  readonly podReads?: string[];
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
    ...(scene.pod === undefined
      ? {}
      : {
          sandboxLost: async (reading: ParsedCodingRun) => {
            scene.podReads?.push(reading.metadata.uid);
            if (scene.pod instanceof Error) throw scene.pod;
            return scene.pod === 'standing' ? undefined : scene.pod!.lost;
          },
        }),
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

  it('throws a TIMEOUT on when the check was never sent to the toolbox, without reading the pod', async () => {
    const podReads: string[] = [];
    const state = startingState();
    await expect(verifyUnanswered({ required: true, retries: 0, neverSent: true, pod: 'standing', podReads, state })).rejects.toMatchObject(
      { name: 'SandboxError', reason: 'TIMEOUT', written: false },
    );
    expect(podReads).toEqual([]);
    expect(state.verification).toBeUndefined();
    expect(state.stop).toBeUndefined();
  });

  it('reads the sandbox pod once, and fails the check when the pod still stands', async () => {
    const podReads: string[] = [];
    const { outcome, state } = await verifyUnanswered({ required: true, retries: 0, pod: 'standing', podReads });
    expect(podReads).toEqual(['uid-1']);
    expect(outcome).toBe('done');
    expect(state.stop).toMatchObject({ reason: 'VerificationFailed' });
    expect(state.verification).toMatchObject({ passed: false, timedOut: true, attempts: 1 });
  });

  it('throws the TIMEOUT on, saying why, when the sandbox pod is lost (its node NotReady), so finalize is retried into SandboxLost', async () => {
    const podReads: string[] = [];
    const state = startingState();
    const lost = 'pod team/chamvi-r-sandbox is not Ready (NodeNotReady)';
    const thrown = await verifyUnanswered({ required: false, retries: 2, pod: { lost }, podReads, state }).catch((error: unknown) => error);
    expect(thrown).toMatchObject({ name: 'SandboxError', reason: 'TIMEOUT' });
    expect((thrown as Error).message).toContain(lost);
    expect(podReads).toEqual(['uid-1']);
    // No verdict: nothing saved, noted or handed back to the model.
    expect(state.verification).toBeUndefined();
    expect(state.verificationNote).toBeUndefined();
    expect(state.stage).toBe('finalizing');
    expect(state.messages).toHaveLength(1);
  });

  it('throws the TIMEOUT on when the sandbox pod cannot be read, since nothing tells a stopped toolbox from a lost node', async () => {
    const state = startingState();
    const thrown = await verifyUnanswered({ required: true, retries: 0, pod: new Error('connect ECONNREFUSED'), state }).catch(
      (error: unknown) => error,
    );
    expect(thrown).toMatchObject({ name: 'SandboxError', reason: 'TIMEOUT' });
    expect((thrown as Error).message).toContain('connect ECONNREFUSED');
    expect(state.verification).toBeUndefined();
    expect(state.stop).toBeUndefined();
  });

  it('keeps the saved verdict when the finalize is redone after a crash, without running the check again', async () => {
    const first = await verifyUnanswered({ required: false, retries: 0 });
    const redone = await verifyUnanswered({ required: false, retries: 0, state: structuredClone(first.saved[0]!) });
    expect(redone.outcome).toBe('done');
    expect(redone.calls).toEqual([]);
    expect(redone.state.verificationNote).toBe(first.state.verificationNote);
  });

  it.each<SandboxErrorReason>(['TRANSPORT', 'PROTOCOL', 'CLOSED', 'ABORTED', 'RESPONSE_TOO_LARGE'])(
    'throws a %s SandboxError on, so the finalize is retried as before, without reading the pod',
    async (reason) => {
      const podReads: string[] = [];
      await expect(verifyUnanswered({ required: true, retries: 0, reason, pod: 'standing', podReads })).rejects.toMatchObject({
        name: 'SandboxError',
        reason,
      });
      expect(podReads).toEqual([]);
    },
  );
});
