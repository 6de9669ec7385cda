// Table test of the run's phase changes (reconcile/run-status-transitions.ts), the one
// computation the controller and the workers share: a status and what happened in, the
// status out. Pure: no cluster, an injected clock.
import { describe, expect, it } from 'vitest';
import { APPROVALS_KEPT, type CodingRunStatus, type Condition, type PendingApproval } from '../../operator/src/api/index.ts';
import {
  RUNNING_MESSAGE,
  awaitApprovalStatus,
  enterPhase,
  failStatus,
  finishStatus,
  loopOutcome,
  recordAnsweredApproval,
  refusedApprovalStatus,
  runningAfterStepStatus,
} from '../../operator/src/reconcile/run-status-transitions.ts';
import { FAILURE_MESSAGES } from '../../operator/src/api/failure-messages.ts';
import { decideVerification, verificationOf } from '../../operator/src/reconcile/verification-verdict.ts';

const earlier = '2026-11-30T08:00:00.000Z';
const now = new Date('2026-11-30T09:00:00Z');
const generation = 3;
const condition = (type: Condition['type'], status: Condition['status'], reason: string): Condition => ({
  type,
  status,
  reason,
  message: 'm',
  lastTransitionTime: earlier,
  observedGeneration: 1,
});
const progress = {
  steps: 4,
  toolCalls: 7,
  usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15, cacheReadTokens: 0, reasoningTokens: 0, complete: true },
};
const pending: PendingApproval = {
  id: 's4-c8',
  toolName: 'bash',
  input: '{"command":"make"}',
  inputBytes: 18,
  inputSha256: 'ab'.repeat(32),
  requestedAt: earlier,
};

const running = (): CodingRunStatus => ({
  phase: 'Running',
  message: RUNNING_MESSAGE,
  startTime: earlier,
  conditions: [
    condition('Accepted', 'True', 'Valid'),
    condition('SandboxReady', 'True', 'PodReady'),
    condition('Ready', 'False', 'Running'),
    condition('Reconciling', 'True', 'Running'),
  ],
});
const waiting = (): CodingRunStatus => {
  const status = running();
  status.phase = 'WaitingForApproval';
  status.pendingApproval = pending;
  status.conditions!.push(condition('AwaitingApproval', 'True', 'ToolCallNeedsApproval'));
  return status;
};
const find = (status: CodingRunStatus, type: Condition['type']) => status.conditions?.find((each) => each.type === type);

describe('terminal transitions (finishStatus, failStatus)', () => {
  it.each([
    ['a running run succeeds', running, 'Succeeded', 'Completed', { SandboxReady: ['False', 'RunFinished'], AwaitingApproval: undefined }],
    ['a running run fails', running, 'Failed', 'SandboxLost', { SandboxReady: ['False', 'RunFinished'], AwaitingApproval: undefined }],
    [
      'a waiting run fails: its approval is no longer pending',
      waiting,
      'Failed',
      'DeadlineExceeded',
      { SandboxReady: ['False', 'RunFinished'], AwaitingApproval: ['False', 'DeadlineExceeded'] },
    ],
    [
      'a pending run is cancelled: no sandbox condition is invented',
      (): CodingRunStatus => ({ phase: 'Pending' }),
      'Cancelled',
      'Deleted',
      { SandboxReady: undefined, AwaitingApproval: undefined },
    ],
  ] as const)('%s', (_name, before, phase, reason, conditions) => {
    const status = finishStatus(before(), phase, reason, 'why', generation, now);
    expect(status).toMatchObject({ phase, reason, message: 'why', completionTime: now.toISOString() });
    expect(status.pendingApproval).toBeUndefined();
    // Job-like: the terminal condition appears at the end, carrying the run's reason.
    expect(find(status, phase === 'Succeeded' ? 'Succeeded' : 'Failed')).toMatchObject({
      status: 'True',
      reason,
      observedGeneration: generation,
      lastTransitionTime: now.toISOString(),
    });
    expect(find(status, phase === 'Succeeded' ? 'Failed' : 'Succeeded')).toBeUndefined();
    expect(find(status, 'Reconciling')).toMatchObject({ status: 'False', reason, lastTransitionTime: now.toISOString() });
    expect(find(status, 'Ready')).toMatchObject({ status: phase === 'Succeeded' ? 'True' : 'False', reason });
    expect(find(status, 'Stalled')?.status).toBe(phase === 'Succeeded' ? undefined : 'True');
    for (const [type, expected] of Object.entries(conditions)) {
      const found = find(status, type as Condition['type']);
      if (expected === undefined) expect(found?.status ?? 'absent').not.toBe('True');
      else expect(found).toMatchObject({ status: expected[0], reason: expected[1] });
    }
  });

  it('keeps a long message bounded (the API caps status.message)', () => {
    expect(failStatus(running(), 'AgentFailed', 'x'.repeat(10_000), generation, now).message).toHaveLength(4096);
  });

  it('failStatus is finishStatus with Failed', () => {
    expect(failStatus(running(), 'StateLost', 'gone', generation, now)).toEqual(
      finishStatus(running(), 'Failed', 'StateLost', 'gone', generation, now),
    );
  });
});

describe('transitions while the agent works', () => {
  it.each([
    [
      'a step parks a call: WaitingForApproval with the whole call shown',
      running,
      'park',
      { phase: 'WaitingForApproval', pendingApproval: pending },
      ['True', 'ToolCallNeedsApproval', now.toISOString()],
    ],
    [
      'a step goes on: Running, counters updated, no approval condition invented',
      running,
      'go on',
      { phase: 'Running', message: RUNNING_MESSAGE },
      undefined,
    ],
    [
      'a resumed run goes on: the approval is cleared and its condition turns False',
      waiting,
      'go on',
      { phase: 'Running', message: RUNNING_MESSAGE },
      ['False', 'NoPendingCall', now.toISOString()],
    ],
    [
      'a waiting run parks again: the condition keeps its transition time',
      waiting,
      'park',
      { phase: 'WaitingForApproval' },
      ['True', 'ToolCallNeedsApproval', earlier],
    ],
  ] as const)('%s', (_name, before, what, expected, awaiting) => {
    const status =
      what === 'park'
        ? awaitApprovalStatus(before(), progress, pending, 'fix', generation, now)
        : runningAfterStepStatus(before(), progress, generation, now);
    expect(status).toMatchObject({ ...expected, steps: 4, toolCalls: 7, usage: progress.usage });
    if (what === 'go on') expect(status.pendingApproval).toBeUndefined();
    if (what === 'park') expect(status.message).toBe('Waiting for approval of a bash call: kubectl codingrun approve fix (or deny).');
    const found = find(status, 'AwaitingApproval');
    if (awaiting === undefined) expect(found).toBeUndefined();
    else expect(found).toMatchObject({ status: awaiting[0], reason: awaiting[1], lastTransitionTime: awaiting[2] });
    expect(status.completionTime).toBeUndefined();
    // Still in progress for every tool: Reconciling keeps its transition time across steps.
    expect(find(status, 'Reconciling')).toMatchObject({ status: 'True', reason: expected.phase, lastTransitionTime: earlier });
    expect(find(status, 'Ready')).toMatchObject({ status: 'False', reason: expected.phase });
  });

  it.each([
    ['a waiting run says why the approval was refused', waiting, 'refused: wrong sha256'],
    ['a run no longer waiting keeps its message', running, RUNNING_MESSAGE],
  ] as const)('%s', (_name, before, message) => {
    const status = refusedApprovalStatus(before(), 'refused: wrong sha256');
    expect(status.message).toBe(message);
    expect(status.phase).toBe(before().phase);
  });

  it.each([
    [
      'Pending → Pending with another reason is a change',
      { phase: 'Pending', reason: 'IsolationNotEnforced' } as CodingRunStatus,
      'Pending',
      'Queued',
      true,
    ],
    ['the same phase and reason is no change', { phase: 'Pending', reason: 'Queued' } as CodingRunStatus, 'Pending', 'Queued', false],
    ['Provisioning drops the reason', { phase: 'Pending', reason: 'Queued' } as CodingRunStatus, 'Provisioning', undefined, true],
  ] as const)('enterPhase: %s', (_name, before, phase, reason, changed) => {
    const result = enterPhase(structuredClone(before), phase, reason, 'message');
    expect(result.changed).toBe(changed);
    expect(result.status.phase).toBe(phase);
    expect(result.status.reason).toBe(reason);
    expect('reason' in result.status).toBe(reason !== undefined);
  });
});

describe('loopOutcome: how a run whose loop ended finishes', () => {
  it.each([
    [
      'an answer without tool calls succeeds',
      { steps: 3, filesChanged: 2 },
      { phase: 'Succeeded', reason: 'Completed', message: 'Finished in 3 step(s): 2 file(s) changed.' },
    ],
    [
      'a spent budget fails with its reason and message',
      { steps: 9, filesChanged: 1, stop: { reason: 'BudgetExceeded', message: 'out of steps' } },
      { phase: 'Failed', reason: 'BudgetExceeded', message: 'out of steps' },
    ],
    [
      'the deadline fails DeadlineExceeded',
      { steps: 2, filesChanged: 0, stop: { reason: 'DeadlineExceeded', message: 'late' } },
      { phase: 'Failed', reason: 'DeadlineExceeded', message: 'late' },
    ],
  ] as const)('%s', (_name, end, expected) => {
    expect(loopOutcome(end)).toEqual(expected);
  });
});

describe('#15.5 recordAnsweredApproval: who answered, in status', () => {
  const answered = (id: string, user?: string) => ({
    id,
    toolName: 'bash',
    decision: 'approve' as const,
    ...(user ? { user } : {}),
    requestedAt: earlier,
    answeredAt: now.toISOString(),
  });

  it('appends each answer with its user, once per approval id', () => {
    const status = recordAnsweredApproval(running(), answered('s1-c1', 'alice'));
    recordAnsweredApproval(status, answered('s2-c2', 'bob'));
    recordAnsweredApproval(status, answered('s2-c2', 'bob'));
    expect(status.approvals!.map((each) => `${each.id} ${each.user}`)).toEqual(['s1-c1 alice', 's2-c2 bob']);
  });

  it(`keeps the latest ${APPROVALS_KEPT} (the transcript keeps every one)`, () => {
    const status = running();
    for (let call = 1; call <= APPROVALS_KEPT + 5; call++) recordAnsweredApproval(status, answered(`s${call}-c${call}`, 'alice'));
    expect(status.approvals).toHaveLength(APPROVALS_KEPT);
    expect(status.approvals![0]!.id).toBe('s6-c6');
  });
});

describe("a repository's or a model's text in a run's message: one line, nothing hidden", () => {
  // What a check or a setup script printed: a newline and a forged `Phase:` line (kubectl
  // describe sorts Message above Phase), an OSC title, BEL, a tab and a bidi override.
  const forged = 'FAIL\n\u001b]0;owned\u0007\n  Phase:\tSucceeded\n\u202e';
  const hidden = /[\u0000-\u001f\u007f-\u009f\p{Cf}\u2028\u2029]/u;
  const verdict = decideVerification({
    verify: { command: 'npm test', required: true, retries: 0, protect: [] },
    verification: verificationOf({ exitCode: 1, stdout: forged, stderr: '', timedOut: false, outputCapped: false, durationMs: 5 }, 1),
    budgetSpent: undefined,
  });
  const verificationMessage = verdict.kind === 'failed' ? verdict.message : '';
  const setupMessage = FAILURE_MESSAGES.setupFailed('exited with 1', forged);
  const messages = (status: CodingRunStatus) => [status.message!, ...status.conditions!.map((each) => each.message)];

  it('a source quotes it raw (or this test would prove nothing); a failed check quotes it spelled already', () => {
    expect(setupMessage).toContain('\u001b]0;owned');
    // verification-verdict.ts spells what it quotes itself, to bound it once spelled: the sinks
    // below must leave that as it is.
    expect(verificationMessage).toContain('FAIL^J^[]0;owned^G^J  Phase:^ISucceeded^J<U+202E>');
  });

  it.each([
    [
      'a failed verification ends the run (finishStatus)',
      () => failStatus(running(), 'VerificationFailed', verificationMessage, generation, now),
    ],
    ['a failed setup ends the run (failStatus)', () => failStatus(running(), 'SetupFailed', setupMessage, generation, now)],
    ['a waiting run fails (its approval condition too)', () => failStatus(waiting(), 'SetupFailed', setupMessage, generation, now)],
    ['a run enters a phase with such a message (enterPhase)', () => enterPhase(running(), 'Running', 'Retrying', setupMessage).status],
    ['an approval is refused with such a message', () => refusedApprovalStatus(waiting(), setupMessage)],
  ])('%s: the message and every condition message are one line', (_name, transition) => {
    const status = transition();
    expect(status.message).toContain('FAIL^J^[]0;owned^G^J  Phase:^ISucceeded^J<U+202E>');
    for (const message of messages(status)) {
      expect(message).not.toMatch(hidden);
      expect(message).not.toContain('\n');
    }
  });

  it('bounds the message after escaping, so a message of newlines still fits status.message', () => {
    const status = failStatus(running(), 'SetupFailed', `setup: ${'\n'.repeat(5000)}`, generation, now);
    expect(status.message!.length).toBeLessThanOrEqual(4096);
    expect(status.message).toMatch(/^setup: (\^J)+$/);
  });

  it('escapes an already escaped message no further', () => {
    const once = failStatus(running(), 'SetupFailed', setupMessage, generation, now).message!;
    expect(failStatus(running(), 'SetupFailed', once, generation, now).message).toBe(once);
  });
});
