// Which watch events wake a run (controller/run-change-wakes.ts).
// - A run's own ConfigMaps: while the run lives, none (a transcript write a step would cost a
//   reconcile a step); while it is being deleted, every one, since its finalizer waits for them
//   all to be gone. The deletion itself is tested against a real API server
//   (test/integration/controller.test.ts, nothing left behind).
// - The run: every change but a step's progress write (steps, tool calls, usage, timings).
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { configMapChangeWakes, runChangeWakes } from '../../operator/src/controller/run-change-wakes.ts';

const run = (metadata: Partial<CodingRun['metadata']> = {}) =>
  ({ metadata: { name: 'demo', namespace: 'team-a', uid: 'u-1', ...metadata }, spec: {} }) as unknown as CodingRun;

describe('a change to a run-owned ConfigMap', () => {
  it('does not wake a run that lives, whatever its phase', () => {
    expect(configMapChangeWakes(run())).toBe(false);
    expect(configMapChangeWakes({ ...run(), status: { phase: 'Succeeded' } } as CodingRun)).toBe(false);
  });

  it('wakes a run being deleted, so that its finalizer goes once the last ConfigMap has', () => {
    expect(configMapChangeWakes(run({ deletionTimestamp: '2026-12-01T20:00:00Z' }))).toBe(true);
  });

  it('wakes the run when the cache does not have it (the label cut its name, or the cache is behind)', () => {
    expect(configMapChangeWakes(undefined)).toBe(true);
  });
});

describe('a change to a run', () => {
  const running = {
    metadata: { name: 'demo', namespace: 'team-a', uid: 'u-1', generation: 1, resourceVersion: '10', annotations: { a: 'b' } },
    spec: { task: 'Fix it.', budget: { maxSteps: 10 } },
    status: {
      phase: 'Running',
      podName: 'demo-sandbox',
      steps: 1,
      toolCalls: 1,
      usage: { inputTokens: 100, outputTokens: 10, totalTokens: 110, complete: true },
      timings: [{ phase: 'Clone', start: '2026-12-01T20:00:00Z', durationMs: 100 }],
      conditions: [{ type: 'SandboxReady', status: 'True', reason: 'PodReady', message: 'ready' }],
    },
  } as unknown as CodingRun;
  type Loose = { metadata: Record<string, unknown>; spec: Record<string, unknown>; status: Record<string, unknown> };
  /** The run as a later event has it: a new resourceVersion, with `change` applied to a copy. */
  const next = (change: (copy: Loose) => void): CodingRun => {
    const copy = structuredClone(running) as unknown as Loose;
    copy.metadata.resourceVersion = '11';
    change(copy);
    return copy as unknown as CodingRun;
  };

  it("does not wake it for a step's progress: steps, tool calls, usage and timings", () => {
    const progressed = next((copy) => {
      copy.status.steps = 2;
      copy.status.toolCalls = 3;
      copy.status.usage = { inputTokens: 250, outputTokens: 30, totalTokens: 280, complete: true };
      copy.status.timings = [
        ...(running.status!.timings ?? []),
        { phase: 'FirstModelCall', start: '2026-12-01T20:00:01Z', durationMs: 500 },
      ];
      copy.metadata.managedFields = [{ manager: 'chamvi-operator' }];
    });
    expect(runChangeWakes(running, progressed)).toBe(false);
    // The first progress write adds fields the run did not have yet.
    const fresh = next((copy) => {
      delete copy.status.steps;
      delete copy.status.usage;
    });
    expect(runChangeWakes(fresh, progressed)).toBe(false);
  });

  it('wakes it for anything else: phase, conditions, a pending approval, annotations, spec, deletion, labels', () => {
    const changes: ((copy: Loose) => void)[] = [
      (copy) => (copy.status.phase = 'Succeeded'),
      (copy) => (copy.status.conditions = []),
      (copy) => (copy.status.pendingApproval = { id: 'a1', toolName: 'bash' }),
      (copy) => (copy.status.message = 'Waiting for approval.'),
      (copy) => (copy.metadata.annotations = { 'chamvi.dev/approve': 'a1' }),
      (copy) => (copy.metadata.deletionTimestamp = '2026-12-01T20:00:00Z'),
      (copy) => (copy.metadata.labels = { team: 'a' }),
      (copy) => (copy.metadata.finalizers = []),
      (copy) => {
        copy.metadata.generation = 2;
        copy.spec.task = 'Fix it properly.';
      },
      // A progress write that also changes a phase is not progress alone.
      (copy) => {
        copy.status.steps = 2;
        copy.status.phase = 'WaitingForApproval';
      },
    ];
    for (const change of changes) expect(runChangeWakes(running, next(change))).toBe(true);
  });

  it('wakes it when first seen', () => {
    expect(runChangeWakes(undefined, running)).toBe(true);
  });
});
