// The in-memory API servers check a delete's uid precondition as the real one does
// (test/integration/delete-preconditions.test.ts): a ConfigMap or NetworkPolicy deleted and made
// again under its name since the caller looked is another object, so a delete naming the old uid
// is a 409 Conflict and deletes nothing. Local mode (cli/local/memory-kube-gateway.ts) and the
// reconciler's memory world (test/support/memory-run-world.ts) that ignored the uid deleted the
// new object, and so hid a caller that relied on the precondition.
import { describe, expect, it } from 'vitest';
import { API_VERSION, FINALIZER, KIND, RUN_UID_LABEL, type CodingRun } from '../../operator/src/api/index.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { isConflict } from '../../operator/src/kube/api-errors.ts';
import { goneUnlessSame } from '../../operator/src/kube/kube-gateway.ts';
import type { ObjectMetadata } from '../../operator/src/kube/metadata-only.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../../operator/src/reconcile/ownership.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { memoryRunWorld } from '../support/memory-run-world.ts';

describe('MemoryKubeGateway (local mode) deletes a ConfigMap or NetworkPolicy by its uid', () => {
  const gateway = () =>
    new MemoryKubeGateway(
      codingRunFixture({ metadata: { uid: 'uid-1', finalizers: [] } }),
      { configMaps: new Map([['script', { data: { steps: '[]' }, binaryData: {} }]]), secrets: new Map() },
      () => {},
    );
  const configMapUid = (memory: MemoryKubeGateway, name: string) => memory.caches().configMaps.get('agents', name)?.metadata?.uid;
  const policyUid = (memory: MemoryKubeGateway, name: string) => memory.caches().networkPolicies.get('agents', name)?.metadata?.uid;

  it('gives each ConfigMap a uid, from the manifest or put, and keeps it when one is replaced', () => {
    const memory = gateway();
    expect(configMapUid(memory, 'script')).toBeTruthy();
    memory.putConfigMap({ metadata: { name: 'fix-diff', namespace: 'agents' }, data: { diff: 'a' } });
    const uid = configMapUid(memory, 'fix-diff');
    expect(uid).toBeTruthy();
    expect(uid).not.toBe(configMapUid(memory, 'script'));
    memory.putConfigMap({ metadata: { name: 'fix-diff', namespace: 'agents' }, data: { diff: 'b' } });
    expect(configMapUid(memory, 'fix-diff')).toBe(uid);
  });

  it('answers 409 Conflict to a ConfigMap delete naming the uid of one deleted and made again, keeps the new one, and deletes by its own uid', async () => {
    const memory = gateway();
    memory.putConfigMap({ metadata: { name: 'fix-diff', namespace: 'agents' }, data: { diff: 'a' } });
    const old = configMapUid(memory, 'fix-diff')!;
    await memory.deleteConfigMap('agents', 'fix-diff', old);
    expect(memory.configMap('agents', 'fix-diff')).toBeUndefined();
    memory.putConfigMap({ metadata: { name: 'fix-diff', namespace: 'agents' }, data: { diff: 'someone else' } });
    const current = configMapUid(memory, 'fix-diff')!;
    expect(current).not.toBe(old);

    const refused = await memory.deleteConfigMap('agents', 'fix-diff', old).catch((error: unknown) => error);
    expect(isConflict(refused)).toBe(true);
    expect(String(refused)).toContain(`UID in precondition: ${old}, UID in object meta: ${current}`);
    await expect(goneUnlessSame(memory.deleteConfigMap('agents', 'fix-diff', old))).resolves.toBeUndefined();
    expect(memory.configMap('agents', 'fix-diff')?.data?.diff).toBe('someone else');

    await memory.deleteConfigMap('agents', 'fix-diff', current);
    expect(memory.configMap('agents', 'fix-diff')).toBeUndefined();
    await expect(memory.deleteConfigMap('agents', 'fix-diff', current)).resolves.toBeUndefined();
  });

  it('answers 409 Conflict to a NetworkPolicy delete naming another uid, keeps the policy, and deletes by its own uid', async () => {
    const memory = gateway();
    await memory.createNetworkPolicy({ metadata: { name: 'fix-sandbox', namespace: 'agents' }, spec: { podSelector: {} } });
    const uid = policyUid(memory, 'fix-sandbox')!;
    expect(uid).toBeTruthy();

    const refused = await memory.deleteNetworkPolicy('agents', 'fix-sandbox', 'np-0').catch((error: unknown) => error);
    expect(isConflict(refused)).toBe(true);
    expect(policyUid(memory, 'fix-sandbox')).toBe(uid);

    await memory.deleteNetworkPolicy('agents', 'fix-sandbox', uid);
    expect(policyUid(memory, 'fix-sandbox')).toBeUndefined();
  });

  it('keeps a NetworkPolicy uid when it is replaced', async () => {
    const memory = gateway();
    await memory.createNetworkPolicy({ metadata: { name: 'fix-sandbox', namespace: 'agents' }, spec: { podSelector: {} } });
    const uid = policyUid(memory, 'fix-sandbox');
    expect(uid).toBeTruthy();
    await memory.replaceNetworkPolicy({
      metadata: { name: 'fix-sandbox', namespace: 'agents' },
      spec: { podSelector: {}, policyTypes: ['Egress'] },
    });
    expect(policyUid(memory, 'fix-sandbox')).toBe(uid);
  });
});

describe("the memory run world deletes a run's ConfigMap by its uid", () => {
  const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], allowUnisolatedSandboxes: true, networkPolicy: false }, {});
  const deleting: CodingRun = codingRunFixture({
    metadata: { deletionTimestamp: '2026-11-29T12:00:00Z', finalizers: [FINALIZER] },
    status: { phase: 'Succeeded', reason: 'Completed', completionTime: '2026-11-29T11:00:00Z' },
  });
  const diff = (uid: string, owner?: string): ObjectMetadata => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      namespace: 'agents',
      name: 'fix-diff',
      uid,
      ...(owner
        ? {
            labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [RUN_UID_LABEL]: owner },
            ownerReferences: [{ apiVersion: API_VERSION, kind: KIND, name: 'fix', uid: owner, controller: true }],
          }
        : {}),
    },
  });

  it('refuses the delete of a ConfigMap made again under the name since the cache saw it, which stays; the reconcile goes on', async () => {
    const world = memoryRunWorld({ runs: [deleting], config, configMaps: [diff('cm-1', deleting.metadata.uid)] });
    // Deleted and made again by someone else; the watch has not brought it yet.
    world.storedConfigMaps.put(diff('cm-2'));
    await expect(world.reconciler.reconcile('agents/fix')).resolves.toBeDefined();
    expect(world.calls.get('deleteConfigMap')).toBe(1);
    expect(world.deletedConfigMaps).toEqual([]);
    expect(world.storedConfigMaps.get('agents', 'fix-diff')?.metadata?.uid).toBe('cm-2');
  });

  it('deletes the ConfigMap the cache saw when it is still the one held', async () => {
    const world = memoryRunWorld({ runs: [deleting], config, configMaps: [diff('cm-1', deleting.metadata.uid)] });
    await world.reconciler.reconcile('agents/fix');
    expect(world.deletedConfigMaps).toEqual(['fix-diff']);
    expect(world.storedConfigMaps.get('agents', 'fix-diff')).toBeUndefined();
  });
});
