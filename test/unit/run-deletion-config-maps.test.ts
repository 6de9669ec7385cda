// A deleted run's ConfigMaps are deleted a few at each reconcile (decide.ts
// CONFIG_MAP_DELETES_PER_RECONCILE): anyone who may create ConfigMaps in the namespace can give
// thousands the run's labels and ownerReference, and deleting them all in one reconcile held
// one of the controller's few reconcile slots for minutes.
import { describe, expect, it } from 'vitest';
import { API_VERSION, FINALIZER, KIND, RUN_UID_LABEL, type CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import type { ObjectMetadata } from '../../operator/src/kube/metadata-only.ts';
import { CONFIG_MAP_DELETES_PER_RECONCILE } from '../../operator/src/reconcile/decide.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../../operator/src/reconcile/ownership.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { memoryRunWorld } from '../support/memory-run-world.ts';

const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], allowUnisolatedSandboxes: true, networkPolicy: false }, {});
const deleted: CodingRun = codingRunFixture({
  metadata: { deletionTimestamp: '2026-11-29T12:00:00Z', finalizers: [FINALIZER] },
  status: { phase: 'Succeeded', reason: 'Completed', completionTime: '2026-11-29T11:00:00Z' },
});

function ownedBy(uid: string, name: string): ObjectMetadata {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      namespace: deleted.metadata.namespace,
      name,
      uid: `cm-${name}`,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [RUN_UID_LABEL]: uid },
      ownerReferences: [{ apiVersion: API_VERSION, kind: KIND, name: 'fix', uid, controller: true }],
    },
  };
}

const forged = Array.from({ length: 5000 }, (_, index) => ownedBy(deleted.metadata.uid, `forged-${index}`));

describe("deleting a run's ConfigMaps", () => {
  it.each([
    ['the cache shows each delete at once', false],
    ['the watch has not brought the deletes', true],
  ])('deletes at most the bound at each reconcile and looks again at once, then lets the finalizer go (%s)', async (_, stale) => {
    const other = ownedBy('uid-another-run', 'another-runs-diff');
    const world = memoryRunWorld({ runs: [deleted], config, configMaps: [...forged, other], stale });
    const first = await world.reconciler.reconcile('agents/fix');
    expect(world.calls.get('deleteConfigMap')).toBe(CONFIG_MAP_DELETES_PER_RECONCILE);
    expect(first.requeueAfterMs).toBeDefined();
    expect(world.calls.get('setRunFinalizers')).toBeUndefined();
    let reconciles = 1;
    while (world.runs.get('agents', 'fix')?.metadata.finalizers?.includes(FINALIZER) && reconciles < 200) {
      const before = world.deletedConfigMaps.length;
      const result = await world.reconciler.reconcile('agents/fix');
      reconciles++;
      expect(world.deletedConfigMaps.length - before).toBeLessThanOrEqual(CONFIG_MAP_DELETES_PER_RECONCILE);
      if (world.runs.get('agents', 'fix')?.metadata.finalizers?.includes(FINALIZER)) expect(result.requeueAfterMs).toBeDefined();
    }
    // Each deleted once (a cache behind does not send the same DELETEs again), the other run's never.
    expect(new Set(world.deletedConfigMaps).size).toBe(5000);
    expect(world.deletedConfigMaps).toHaveLength(5000);
    expect(world.deletedConfigMaps).not.toContain('another-runs-diff');
    expect(reconciles).toBe(5000 / CONFIG_MAP_DELETES_PER_RECONCILE + 1);
    expect(world.runs.get('agents', 'fix')?.metadata.finalizers).toEqual([]);
  });
});
