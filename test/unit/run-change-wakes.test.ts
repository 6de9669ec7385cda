// Which watch events wake a run (controller/run-change-wakes.ts).
// - A run's own ConfigMaps: while the run lives, none (a transcript write a step would cost a
//   reconcile a step); while it is being deleted, every one, since its finalizer waits for them
//   all to be gone. The deletion itself is tested against a real API server
//   (test/integration/controller.test.ts, nothing left behind).
// - The run: every change but a step's progress write (steps, tool calls, usage, timings), the
//   egress proxy's counts (status.egress), its admission stamp, and what a queued or refused
//   run's own reconcile rewrites at each look.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { configMapChangeWakes, queueChanged, runChangeWakes } from '../../operator/src/controller/run-change-wakes.ts';

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

  it("does not wake it for the egress proxy's counts in status.egress, first written or added to", () => {
    const egress = (connections: number, denied: number) => ({
      connections,
      allowed: connections - denied,
      denied,
      bytesSent: 100 * connections,
      bytesReceived: 1_000 * connections,
      hosts: [{ host: 'blocked.example', port: 443, allowed: 0, denied, rule: 'not-on-run-list' }],
      hostsTruncated: false,
    });
    const counted = next((copy) => (copy.status.egress = egress(1, 1)));
    const bumped = next((copy) => {
      copy.metadata.resourceVersion = '12';
      copy.status.egress = egress(3, 2);
    });
    expect(runChangeWakes(running, counted)).toBe(false);
    expect(runChangeWakes(counted, bumped)).toBe(false);
    // The proxy's write beside another change still wakes it for that change.
    const ended = next((copy) => {
      copy.status.egress = egress(3, 2);
      copy.status.phase = 'Failed';
    });
    expect(runChangeWakes(counted, ended)).toBe(true);
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

  describe('while it is queued', () => {
    const queuedAt = (position: number, heldBy = 'ClusterSlots', reason = 'Queued') => {
      const message = `Queued: position ${position} for a sandbox slot.`;
      return next((copy) => {
        copy.status = {
          phase: 'Pending',
          reason,
          message,
          queue: { heldBy, position },
          conditions: [
            { type: 'Ready', status: 'False', reason, message, lastTransitionTime: '2026-12-01T20:00:00Z' },
            { type: 'Reconciling', status: 'True', reason, message, lastTransitionTime: '2026-12-01T20:00:00Z' },
          ],
        };
      });
    };

    it('does not wake it for the new place its own reconcile wrote: message, conditions and position', () => {
      expect(runChangeWakes(queuedAt(40), queuedAt(31))).toBe(false);
    });

    it('wakes it when what holds it changes, it leaves the queue, or anything else changes', () => {
      expect(runChangeWakes(queuedAt(40), queuedAt(40, 'NamespaceActiveRuns'))).toBe(true);
      expect(runChangeWakes(queuedAt(40), queuedAt(40, 'ClusterSlots', 'IsolationNotEnforced'))).toBe(true);
      const admitted = next((copy) => (copy.status = { phase: 'Provisioning' }));
      expect(runChangeWakes(queuedAt(2), admitted)).toBe(true);
      const annotated = queuedAt(40) as unknown as Loose;
      annotated.metadata.annotations = { 'chamvi.dev/cancel': 'true' };
      expect(runChangeWakes(queuedAt(40), annotated as unknown as CodingRun)).toBe(true);
      const retimed = queuedAt(31) as unknown as Loose;
      (retimed.status.conditions as Array<Record<string, string>>)[0]!.lastTransitionTime = '2026-12-01T20:01:00Z';
      expect(runChangeWakes(queuedAt(40), retimed as unknown as CodingRun)).toBe(true);
    });
  });
  describe('while its pod is refused (Pending, SandboxRefused)', () => {
    const refusedAt = (sequence: number, used = 4, reason = 'SandboxRefused') => {
      const message = `The API server refused the run's Pod demo-sandbox (HTTP 403): exceeded quota: pods, used: pods=${used}, limited: pods=4.`;
      return next((copy) => {
        copy.status = {
          phase: 'Pending',
          reason,
          message,
          admission: { sequence, time: `2026-12-01T20:00:${String(sequence).padStart(2, '0')}Z` },
          conditions: [
            { type: 'Accepted', status: 'True', reason: 'Valid', message: 'The run is valid.', lastTransitionTime: '2026-12-01T19:59:00Z' },
            { type: 'SandboxReady', status: 'False', reason, message, lastTransitionTime: '2026-12-01T20:00:00Z' },
          ],
        };
      });
    };

    it("does not wake it for what its own try wrote: a new admission (sequence, time) and the API server's new answer", () => {
      expect(runChangeWakes(refusedAt(7), refusedAt(8))).toBe(false);
      expect(runChangeWakes(refusedAt(7, 4), refusedAt(8, 3))).toBe(false);
    });

    it('wakes it when it leaves the refusal, or anything else changes', () => {
      expect(
        runChangeWakes(
          refusedAt(7),
          next((copy) => (copy.status = { phase: 'Provisioning', admission: { sequence: 8 } })),
        ),
      ).toBe(true);
      expect(runChangeWakes(refusedAt(7), refusedAt(7, 4, 'Queued'))).toBe(true);
      const cancelled = refusedAt(7) as unknown as Loose;
      cancelled.metadata.annotations = { 'chamvi.dev/cancel': 'true' };
      expect(runChangeWakes(refusedAt(7), cancelled as unknown as CodingRun)).toBe(true);
    });
  });
});

describe('a change to a run, for the queue of sandbox slots', () => {
  const inPhase = (phase?: string) => ({ ...run(), ...(phase ? { status: { phase } } : {}) }) as CodingRun;

  it('wakes the queue when a run is first seen, ends or leaves the queue', () => {
    expect(queueChanged(undefined, inPhase())).toBe(true);
    expect(queueChanged(undefined, inPhase('Succeeded'))).toBe(true);
    expect(queueChanged(inPhase('Running'), inPhase('Failed'))).toBe(true);
    expect(queueChanged(inPhase('Pending'), inPhase('Failed'))).toBe(true);
    expect(queueChanged(inPhase('Pending'), inPhase('Provisioning'))).toBe(true);
    expect(queueChanged(inPhase(), inPhase('Provisioning'))).toBe(true);
  });

  // Its phase stays Running while another's finalizer keeps it: only the finalizer says the slot is free.
  it('wakes the queue when a run being deleted loses the operator finalizer while another keeps it', () => {
    const deleting = (finalizers: string[]) =>
      ({
        ...inPhase('Running'),
        metadata: { ...inPhase('Running').metadata, deletionTimestamp: '2026-12-07T10:00:00Z', finalizers },
      }) as CodingRun;
    expect(queueChanged(deleting(['example.com/keep', 'chamvi.dev/cleanup']), deleting(['example.com/keep']))).toBe(true);
    expect(queueChanged(deleting(['example.com/keep']), deleting(['example.com/keep']))).toBe(false);
  });

  it('does not for a change inside the queue or a running run, nor for an ended run again', () => {
    expect(queueChanged(inPhase(), inPhase('Pending'))).toBe(false);
    expect(queueChanged(inPhase('Pending'), inPhase('Pending'))).toBe(false);
    expect(queueChanged(inPhase('Provisioning'), inPhase('Running'))).toBe(false);
    expect(queueChanged(inPhase('Running'), inPhase('WaitingForApproval'))).toBe(false);
    expect(queueChanged(inPhase('Succeeded'), inPhase('Succeeded'))).toBe(false);
  });
});
