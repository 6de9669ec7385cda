// Which changes to a run's ConfigMaps wake the run (controller/run-controller.ts): while the run
// lives, none (a transcript write a step would cost a reconcile a step); while it is being
// deleted, every one, since its finalizer waits for them all to be gone. The deletion itself is
// tested against a real API server (test/integration/controller.test.ts, nothing left behind).
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { configMapChangeWakes } from '../../operator/src/controller/run-controller.ts';

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
