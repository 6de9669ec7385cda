// The Events `kubectl describe codingrun` prints (kube/event-recorder.ts): whatever a message
// quotes, it is one line that cannot forge another or drive the terminal.
import { describe, expect, it } from 'vitest';
import type { CoreV1Event } from '@kubernetes/client-node';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import type { KubeGateway } from '../../operator/src/kube/kube-gateway.ts';

const run = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'fix', namespace: 'team', uid: 'u-1' },
};

function recorder(): { events: CoreV1Event[]; recorder: EventRecorder } {
  const events: CoreV1Event[] = [];
  const kube = { createEvent: async (event: CoreV1Event) => void events.push(event) } as unknown as KubeGateway;
  return { events, recorder: new EventRecorder(kube, 'operator-0', { warn: () => {} }, { now: () => new Date('2026-11-30T09:00:00Z') }) };
}

describe('EventRecorder.record', () => {
  it('writes an operator message as it is', async () => {
    const { events, recorder: events_ } = recorder();
    await events_.record(run, { type: 'Normal', reason: 'Completed', message: 'Finished in 3 step(s): 2 file(s) changed.' });
    expect(events[0]).toMatchObject({ type: 'Normal', reason: 'Completed', message: 'Finished in 3 step(s): 2 file(s) changed.' });
  });

  it("writes a check's output quoted in a message on one line, its hidden characters spelled out", async () => {
    const { events, recorder: events_ } = recorder();
    const message = 'Verification failed: (last output: FAIL\n\u001b]0;owned\u0007\n  Phase:\tSucceeded\n\u202e).';
    await events_.record(run, { type: 'Warning', reason: 'VerificationFailed', message });
    expect(events[0]!.message).toBe('Verification failed: (last output: FAIL^J^[]0;owned^G^J  Phase:^ISucceeded^J<U+202E>).');
    expect(events[0]!.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u);
  });

  it('keeps the message within 1024 characters once escaped', async () => {
    const { events, recorder: events_ } = recorder();
    await events_.record(run, { type: 'Warning', reason: 'SetupFailed', message: `spec.sandbox.setup exited 1: ${'\u001b'.repeat(2000)}` });
    expect(events[0]!.message!.length).toBeLessThanOrEqual(1024);
    expect(events[0]!.message).toMatch(/^spec\.sandbox\.setup exited 1: (\^\[)+$/);
  });

  it.each(['-', '.'])("names the Event a DNS subdomain for a 253-character run name with '%s' where it is cut", async (separator) => {
    const { events, recorder: events_ } = recorder();
    const name = `${'a'.repeat(199)}${separator}${'b'.repeat(53)}`;
    await events_.record({ ...run, metadata: { ...run.metadata, name } }, { type: 'Warning', reason: 'EgressDenied', message: 'refused' });
    const eventName = events[0]!.metadata!.name!;
    expect(eventName.length).toBeLessThanOrEqual(253);
    expect(eventName).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);
    expect(events[0]!.involvedObject.name).toBe(name);
  });
});
