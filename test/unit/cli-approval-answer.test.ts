// approve/deny answer exactly the call the run waits for, in the annotation format the
// operator reads, and refuse with a clear error when nothing waits or the id is another.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { answerFor, encodeAnswer } from '../../operator/src/cli/approval-answer.ts';
import { ApprovalIdMismatchError } from '../../operator/src/cli/errors/approval-id-mismatch-error.ts';
import { NothingPendingError } from '../../operator/src/cli/errors/nothing-pending-error.ts';

const pendingApproval = { id: 's12-c2', toolName: 'bash', input: '{"command":"npm test"}', requestedAt: '2026-03-01T12:00:00Z' };
const run = (status: CodingRun['status']): CodingRun => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'fix-bug', namespace: 'agents', uid: 'u' },
  spec: {} as CodingRun['spec'],
  status,
});
const waiting = run({ phase: 'WaitingForApproval', pendingApproval });

describe('answerFor', () => {
  it('answers the pending call', () => {
    expect(answerFor(waiting, { decision: 'approve' })).toEqual({ id: 's12-c2', decision: 'approve' });
    expect(answerFor(waiting, { decision: 'deny', reason: 'no network', id: 's12-c2' })).toEqual({ id: 's12-c2', decision: 'deny', reason: 'no network' });
  });

  it('refuses when the run waits for nothing, naming its phase', () => {
    expect(() => answerFor(run({ phase: 'Running' }), { decision: 'approve' })).toThrow(NothingPendingError);
    expect(() => answerFor(run({ phase: 'Running' }), { decision: 'approve' })).toThrow(/no pending approval \(phase Running\)/);
    expect(() => answerFor(run(undefined), { decision: 'approve' })).toThrow(/phase not set yet/);
  });

  it('refuses a stale pendingApproval on a run that has moved on', () => {
    expect(() => answerFor(run({ phase: 'Succeeded', pendingApproval }), { decision: 'approve' })).toThrow(NothingPendingError);
  });

  it('refuses another id and names the pending one', () => {
    expect(() => answerFor(waiting, { decision: 'approve', id: 's11-c1' })).toThrow(ApprovalIdMismatchError);
    expect(() => answerFor(waiting, { decision: 'approve', id: 's11-c1' })).toThrow(/waiting for approval s12-c2 \(bash\), not s11-c1/);
  });
});

describe('encodeAnswer', () => {
  it('writes the documented JSON, with a reason only when one is given', () => {
    expect(encodeAnswer({ id: 's12-c2', decision: 'approve' })).toBe('{"id":"s12-c2","decision":"approve"}');
    expect(JSON.parse(encodeAnswer({ id: 's1-c1', decision: 'deny', reason: 'say "why"' }))).toEqual({ id: 's1-c1', decision: 'deny', reason: 'say "why"' });
  });
});
