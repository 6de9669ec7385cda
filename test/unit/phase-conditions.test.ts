// Table test of the conditions tools read (reconcile/phase-conditions.ts): for each phase, which
// of Ready, Reconciling, Stalled, Succeeded and Failed a run carries, with which status and
// reason. The e2e tier (gitops-health.test.ts) feeds real statuses to Argo CD's Lua VM and to
// kstatus; this pins the table itself. Pure.
import { describe, expect, it } from 'vitest';
import type { CodingRunStatus, Condition } from '../../operator/src/api/index.ts';
import { observedAgain, withPhaseConditions } from '../../operator/src/reconcile/phase-conditions.ts';

const now = new Date('2026-11-30T10:00:00Z');
const earlier = '2026-11-30T09:00:00.000Z';
const summary = (status: CodingRunStatus) =>
  Object.fromEntries(
    ['Ready', 'Reconciling', 'Stalled', 'Succeeded', 'Failed'].map((type) => {
      const found = status.conditions?.find((condition) => condition.type === type);
      return [type, found ? `${found.status}/${found.reason}` : '-'];
    }),
  );

describe('withPhaseConditions: what each phase says to tools', () => {
  it.each([
    ['a new run with no phase yet', {}, { Ready: 'False/Pending', Reconciling: 'True/Pending', Stalled: '-', Succeeded: '-', Failed: '-' }],
    [
      'a queued run',
      { phase: 'Pending', reason: 'Queued' },
      { Ready: 'False/Queued', Reconciling: 'True/Queued', Stalled: '-', Succeeded: '-', Failed: '-' },
    ],
    [
      'a run whose pod a quota refuses (it may clear: not stalled)',
      { phase: 'Pending', reason: 'SandboxRefused' },
      { Ready: 'False/SandboxRefused', Reconciling: 'True/SandboxRefused', Stalled: '-', Succeeded: '-', Failed: '-' },
    ],
    [
      'a provisioning run',
      { phase: 'Provisioning' },
      { Ready: 'False/Provisioning', Reconciling: 'True/Provisioning', Stalled: '-', Succeeded: '-', Failed: '-' },
    ],
    [
      'a running run',
      { phase: 'Running' },
      { Ready: 'False/Running', Reconciling: 'True/Running', Stalled: '-', Succeeded: '-', Failed: '-' },
    ],
    [
      'a run waiting for a human',
      { phase: 'WaitingForApproval' },
      { Ready: 'False/WaitingForApproval', Reconciling: 'True/WaitingForApproval', Stalled: '-', Succeeded: '-', Failed: '-' },
    ],
    [
      'a succeeded run',
      { phase: 'Succeeded', reason: 'Completed' },
      { Ready: 'True/Completed', Reconciling: 'False/Completed', Stalled: '-', Succeeded: 'True/Completed', Failed: '-' },
    ],
    [
      'a failed run',
      { phase: 'Failed', reason: 'BudgetExceeded' },
      {
        Ready: 'False/BudgetExceeded',
        Reconciling: 'False/BudgetExceeded',
        Stalled: 'True/BudgetExceeded',
        Succeeded: '-',
        Failed: 'True/BudgetExceeded',
      },
    ],
    [
      'a cancelled run: failed, with reason Cancelled',
      { phase: 'Cancelled', reason: 'Cancelled' },
      { Ready: 'False/Cancelled', Reconciling: 'False/Cancelled', Stalled: 'True/Cancelled', Succeeded: '-', Failed: 'True/Cancelled' },
    ],
  ] as const)('%s', (_name, status, expected) => {
    const result = withPhaseConditions(structuredClone(status) as CodingRunStatus, 4, now);
    expect(summary(result)).toEqual(expected);
    for (const condition of result.conditions!) expect(condition.observedGeneration).toBe(4);
  });

  it('drops the retired Complete condition (True for failed runs too) from a status written before', () => {
    const old: Condition = {
      type: 'Complete' as Condition['type'],
      status: 'False',
      reason: 'InProgress',
      message: '',
      lastTransitionTime: earlier,
    };
    const result = withPhaseConditions({ phase: 'Running', conditions: [old] }, 1, now);
    expect(result.conditions!.map((condition) => condition.type)).toEqual(['Ready', 'Reconciling']);
  });

  it("keeps a condition's transition time while its status holds, and moves it when the status flips", () => {
    const running = withPhaseConditions({ phase: 'Running' }, 1, new Date(earlier));
    const waiting = withPhaseConditions({ ...running, phase: 'WaitingForApproval' }, 1, now);
    expect(waiting.conditions!.find((condition) => condition.type === 'Reconciling')!.lastTransitionTime).toBe(earlier);
    const finished = withPhaseConditions({ ...waiting, phase: 'Succeeded', reason: 'Completed' }, 1, now);
    expect(finished.conditions!.find((condition) => condition.type === 'Reconciling')!.lastTransitionTime).toBe(now.toISOString());
  });

  it("puts a message and every condition's message on one line, whoever wrote status.message or the condition", () => {
    const forged = 'FAIL\n\u001b]0;owned\u0007\n  Phase:\tSucceeded\n\u202e';
    const pod: Condition = {
      type: 'SandboxReady',
      status: 'False',
      reason: 'PodNotReady',
      message: `Sandbox pod fix-sbx is Pending (${forged}).`,
      lastTransitionTime: earlier,
    };
    for (const phase of ['Running', 'Failed', 'Succeeded'] as const) {
      const result = withPhaseConditions({ phase, reason: 'SetupFailed', message: `setup: ${forged}`, conditions: [pod] }, 1, now);
      expect(result.message).toBe('setup: FAIL^J^[]0;owned^G^J  Phase:^ISucceeded^J<U+202E>');
      for (const condition of result.conditions!) expect(condition.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\p{Cf}]/u);
      expect(result.conditions!.find((condition) => condition.type === 'Ready')!.message).toBe(result.message);
      expect(result.conditions!.find((condition) => condition.type === 'SandboxReady')!.message).toBe(
        'Sandbox pod fix-sbx is Pending (FAIL^J^[]0;owned^G^J  Phase:^ISucceeded^J<U+202E>).',
      );
    }
  });

  it('observedAgain: a finished run seen at a new generation keeps its conditions, at that generation', () => {
    const finished = withPhaseConditions({ phase: 'Failed', reason: 'SandboxLost', observedGeneration: 1 }, 1, now);
    const again = observedAgain(finished, 2);
    expect(again.observedGeneration).toBe(2);
    expect(again.conditions!.map((condition) => [condition.type, condition.status, condition.observedGeneration])).toEqual(
      finished.conditions!.map((condition) => [condition.type, condition.status, 2]),
    );
  });
});
