// The sandbox pod as decide() sees it (controller/run-reconciler.ts podView): the fields a
// decision reads, taken from the pod as the API server (or the informer's cache) gives it.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { podView } from '../../operator/src/controller/run-reconciler.ts';

const sandboxPod = (status: V1Pod['status'], activeDeadlineSeconds?: number): V1Pod => ({
  metadata: { name: 'fix-sandbox', namespace: 'agents' },
  spec: { containers: [], nodeName: 'node-1', ...(activeDeadlineSeconds !== undefined ? { activeDeadlineSeconds } : {}) },
  status,
});

describe('podView', () => {
  it("carries the pod's activeDeadlineSeconds and status.startTime: the limit the kubelet counts, for decide to end the run before it", () => {
    // The cache holds parsed JSON (a string); the client's typed reads hold a Date: both are read.
    for (const startTime of ['2026-11-29T11:40:00Z', new Date('2026-11-29T11:40:00Z')]) {
      const view = podView(sandboxPod({ phase: 'Running', startTime: startTime as Date }, 1920));
      expect(view).toMatchObject({
        name: 'fix-sandbox',
        phase: 'Running',
        startTime: '2026-11-29T11:40:00.000Z',
        activeDeadlineSeconds: 1920,
      });
    }
  });

  it('leaves both out while the pod has none: no kubelet has started it, or it was made without a limit (a pool pod)', () => {
    const view = podView(sandboxPod({ phase: 'Pending' }));
    expect(view).not.toHaveProperty('startTime');
    expect(view).not.toHaveProperty('activeDeadlineSeconds');
  });
});
