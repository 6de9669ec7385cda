// What the controller takes down of a run the API server will not store (unwritable-run.ts): its
// agent, every pod it may have, by uid where known, and its own policy once no pod is left; and
// when such a run is worth another write.
import { describe, expect, it } from 'vitest';
import type { Action } from '../../operator/src/reconcile/decision.ts';
import type { SandboxPodView } from '../../operator/src/reconcile/observed-run.ts';
import {
  stillUnwritable,
  unwritableMessage,
  unwritableRunTeardown,
  type UnwritableSandbox,
} from '../../operator/src/reconcile/unwritable-run.ts';

const pod = (over: Partial<SandboxPodView> = {}): SandboxPodView => ({
  name: 'a-sandbox',
  phase: 'Running',
  ready: true,
  deleting: false,
  uid: 'pod-1',
  ...over,
});

describe('unwritableRunTeardown', () => {
  const cases: Array<[string, UnwritableSandbox, Action[]]> = [
    ['a run refused while being accepted: nothing to take down', {}, []],
    ['a started run with no pod left: its agent is stopped', { agentStarted: true }, [{ type: 'stopAgent' }]],
    [
      'the pod observed, by its uid',
      { observedPod: pod() },
      [{ type: 'stopAgent' }, { type: 'deletePod', name: 'a-sandbox', uid: 'pod-1' }],
    ],
    [
      'the pod this reconcile created, not cached yet, by its uid',
      { answeredPod: { name: 'a-sandbox', uid: 'pod-2' }, createSent: 'a-sandbox' },
      [{ type: 'stopAgent' }, { type: 'deletePod', name: 'a-sandbox', uid: 'pod-2' }],
    ],
    [
      'a create sent with no answer: by its name',
      { createSent: 'a-sandbox' },
      [{ type: 'stopAgent' }, { type: 'deletePod', name: 'a-sandbox' }],
    ],
    [
      'a claimed pool pod beside a fresh pod observed: both',
      { observedPod: pod(), answeredPod: { name: 'pool-x', uid: 'pod-3' } },
      [{ type: 'stopAgent' }, { type: 'deletePod', name: 'a-sandbox', uid: 'pod-1' }, { type: 'deletePod', name: 'pool-x', uid: 'pod-3' }],
    ],
    [
      'a pod being deleted is not deleted again, and its policy stays while it goes',
      { observedPod: pod({ deleting: true }), createSent: 'a-sandbox', networkPolicy: 'a-sandbox' },
      [{ type: 'stopAgent' }],
    ],
    [
      'a working run (Running, WaitingForApproval): its jobs go, its state stays for the ending that keeps its diff',
      { observedPod: pod(), agentStarted: true, agentWorking: true },
      [{ type: 'stopAgentKeepingState' }, { type: 'deletePod', name: 'a-sandbox', uid: 'pod-1' }],
    ],
    [
      'a working run with no pod left: its state stays too',
      { agentStarted: true, agentWorking: true },
      [{ type: 'stopAgentKeepingState' }],
    ],
    [
      'a run started by this reconcile but stored as Provisioning starts over: its state goes',
      { answeredPod: { name: 'a-sandbox', uid: 'pod-2' }, agentStarted: true },
      [{ type: 'stopAgent' }, { type: 'deletePod', name: 'a-sandbox', uid: 'pod-2' }],
    ],
    [
      'no pod left: its own policy goes',
      { networkPolicy: 'a-sandbox' },
      [{ type: 'stopAgent' }, { type: 'deleteNetworkPolicy', name: 'a-sandbox' }],
    ],
  ];
  it.each(cases)('%s', (_name, sandbox, actions) => {
    expect(unwritableRunTeardown(sandbox)).toEqual(actions);
  });
});

describe('unwritableMessage', () => {
  it('tells the author of a run not started that it is admitted again once smaller', () => {
    const message = unwritableMessage(1500, ['a-sandbox']);
    expect(message).toContain('sandbox pod a-sandbox was deleted and its agent stopped,');
    expect(message).toMatch(/looked at again once it is smaller/);
    expect(message).not.toMatch(/continueFrom/);
  });

  it('tells the author of a working run that it ends once trimmed, keeping its diff for spec.continueFrom', () => {
    for (const message of [unwritableMessage(1500, ['a-sandbox'], true), unwritableMessage(1500, [], true)]) {
      expect(message).toMatch(/its agent stopped, its state kept/);
      expect(message).toMatch(/ends once it is looked at again, keeping its diff against the commit it started from/);
      expect(message).toMatch(/spec\.continueFrom/);
      expect(message).not.toMatch(/looked at again once it is smaller/);
    }
  });
});

describe('stillUnwritable', () => {
  const mark = { generation: 1, bytes: 1_500_000 };
  it.each([
    ['as large, same spec', { generation: 1, bytes: 1_500_000, deleting: false }, true],
    ['larger still', { generation: 1, bytes: 1_500_100, deleting: false }, true],
    ['labels or annotations trimmed', { generation: 1, bytes: 1_499_999, deleting: false }, false],
    ['a new spec', { generation: 2, bytes: 1_500_000, deleting: false }, false],
    ['being deleted', { generation: 1, bytes: 1_500_000, deleting: true }, false],
  ])('%s', (_name, run, still) => {
    expect(stillUnwritable(mark, run)).toBe(still);
  });
});
