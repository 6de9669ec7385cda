// What the controller takes down of a run the API server will not store (unwritable-run.ts): its
// agent, every pod it may have, by uid where known, and its own policy once no pod is left; and
// when such a run is worth another write.
import { describe, expect, it } from 'vitest';
import type { Action } from '../../operator/src/reconcile/decision.ts';
import type { SandboxPodView } from '../../operator/src/reconcile/observed-run.ts';
import {
  stillUnwritable,
  endsOnceWritten,
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
      'no pod left: its own policy goes',
      { networkPolicy: 'a-sandbox' },
      [{ type: 'stopAgent' }, { type: 'deleteNetworkPolicy', name: 'a-sandbox' }],
    ],
  ];
  it.each(cases)('%s', (_name, sandbox, actions) => {
    expect(unwritableRunTeardown(sandbox)).toEqual(actions);
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

describe('endsOnceWritten', () => {
  it.each([
    [undefined, false],
    ['Pending', false],
    // Its agent may have started, but it is given a new pod and starts over once it fits.
    ['Provisioning', false],
    ['Running', true],
    ['WaitingForApproval', true],
  ])('%s: %s', (phase, ends) => {
    expect(endsOnceWritten(phase)).toBe(ends);
  });
});

describe('unwritableMessage', () => {
  it('tells a run that never started that it is looked at again once trimmed', () => {
    const message = unwritableMessage(1500, ['a-sandbox']);
    expect(message).toMatch(/1500 KiB as the API server stores it/);
    expect(message).toMatch(/looked at again once it is smaller/);
    expect(message).not.toMatch(/cannot go on/);
  });

  it('tells a working run (Running, WaitingForApproval) that its work cannot go on and ends once trimmed, without the commit continueFrom needs', () => {
    // Its stop deleted the agent's state, the sign its running jobs heed: trimming ends it.
    const message = unwritableMessage(1500, ['a-sandbox'], true);
    expect(message).toMatch(/Its work cannot go on/);
    expect(message).toMatch(/ends, keeping the diff of its last snapshot, without the commit spec\.continueFrom needs/);
    expect(message).not.toMatch(/looked at again once it is smaller/);
  });
});
