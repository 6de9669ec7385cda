// The ending of a working run whose sandbox the operator took down because the API server
// refused every write of it (unwritable-run.ts): once trimmed and looked at again, it says what
// the operator did and why the run cannot go on, not that its pod disappeared. No cluster:
// decide() is pure, and the reconciler's memory reaches it as ObservedRun.sandboxTakenDown.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { decide } from '../../operator/src/reconcile/decide.ts';
import type { Action } from '../../operator/src/reconcile/decision.ts';
import type { KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';
import type { ObservedRun, SandboxPodView } from '../../operator/src/reconcile/observed-run.ts';
import { sandboxTakenDown } from '../../operator/src/reconcile/unwritable-run.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], allowUnisolatedSandboxes: true, networkPolicy: false }, {});
const now = new Date('2026-11-29T12:00:00Z');
const accepted = [
  { type: 'Accepted' as const, status: 'True' as const, reason: 'Valid', message: 'ok', lastTransitionTime: '2026-11-29T11:59:00Z' },
];
const snapshot: KeptDiff = { source: 'snapshot', diff: '', truncated: false, filesChanged: 0, insertions: 0, deletions: 0 };
const takenDown = { podsDeleted: ['fix-sandbox'], kibibytes: 1530 };

function working(phase: 'Running' | 'WaitingForApproval' = 'Running', annotations?: Record<string, string>): CodingRun {
  return codingRunFixture({
    metadata: { ...(annotations ? { annotations } : {}) },
    status: { phase, startTime: '2026-11-29T11:58:00Z', podName: 'fix-sandbox', conditions: accepted },
  });
}

function observe(run: CodingRun, overrides: Partial<ObservedRun> = {}): ObservedRun {
  return { run, networkPolicyExists: false, ownedConfigMaps: [], keptDiff: snapshot, ...overrides };
}

const pod = (overrides: Partial<SandboxPodView> = {}): SandboxPodView => ({
  name: 'fix-sandbox',
  phase: 'Running',
  ready: true,
  deleting: false,
  ...overrides,
});

describe('decide: a working run whose sandbox the operator took down for its refused writes', () => {
  it.each([
    ['Running, its pod gone', working(), undefined],
    ['Running, its pod still being deleted', working(), pod({ deleting: true })],
    ['WaitingForApproval, its pod gone', working('WaitingForApproval'), undefined],
  ])('ends InvalidSpec, naming the refused writes, when %s', (_, run, observedPod) => {
    const decision = decide(observe(run, { sandboxTakenDown: takenDown, ...(observedPod ? { pod: observedPod } : {}) }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(decision.status!.message).toMatch(/^The operator deleted sandbox pod fix-sandbox and stopped the run's agent: /);
    expect(decision.status!.message).toMatch(/the API server refused every write of this run, which was 1530 KiB/);
    expect(decision.status!.message).toMatch(/cannot go on/);
    expect(decision.status!.message).not.toMatch(/disappeared|being deleted before/);
    expect(decision.actions.map((action) => action.type)).toContain('stopAgent');
  });

  it('keeps its last snapshot first, as any started run that ends does', () => {
    const decision = decide(observe(working(), { sandboxTakenDown: takenDown, keptDiff: undefined }), config, now);
    expect(decision.actions).toContainEqual({ type: 'keepDiff', fromSandbox: false });
    expect(decision.status).toBeUndefined();
  });

  it('still says its pod disappeared when the operator took nothing down (or has forgotten it: a restart)', () => {
    const decision = decide(observe(working()), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason: 'SandboxLost', message: expect.stringMatching(/disappeared/) });
  });

  it('ends Cancelled when its author asked to cancel it: that request comes first', () => {
    const decision = decide(observe(working('Running', { [CANCEL_ANNOTATION]: 'stop' }), { sandboxTakenDown: takenDown }), config, now);
    expect(decision.status).toMatchObject({ phase: 'Cancelled', reason: 'Cancelled' });
  });
});

describe('sandboxTakenDown: what a teardown leaves for the ending to say', () => {
  const teardown: Action[] = [{ type: 'stopAgent' }, { type: 'deletePod', name: 'fix-sandbox', uid: 'pod-1' }];

  it('names the pods deleted and the size of a run stored as Running or WaitingForApproval', () => {
    expect(sandboxTakenDown('Running', teardown, 1530)).toEqual({ podsDeleted: ['fix-sandbox'], kibibytes: 1530 });
    expect(sandboxTakenDown('WaitingForApproval', teardown, 2)).toEqual({ podsDeleted: ['fix-sandbox'], kibibytes: 2 });
  });

  it.each([
    ['a Pending run (admitted again once it fits)', 'Pending', teardown],
    ['a Provisioning run (given a new pod once it fits)', 'Provisioning', teardown],
    ['a run whose pod was gone or being deleted already', 'Running', [{ type: 'stopAgent' }] as Action[]],
  ])('leaves nothing for %s', (_, phase, actions) => {
    expect(sandboxTakenDown(phase, actions, 1530)).toBeUndefined();
  });
});
