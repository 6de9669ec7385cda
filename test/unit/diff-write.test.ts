// The rule of the run's diff ConfigMap (reconcile/diff-write.ts): a step's snapshot never
// replaces the final diff a run's ending stored, and a final write always stores its own diff.
// Before the mark, a snapshot that landed after the ending replaced the diff whose sha256 the
// ender had written to status.result.diffSha256, and every reader refused the run's diff. A
// first version of the mark let the first final diff stay, so a final mark and a diff planted
// by anyone who may update ConfigMaps were what the ender certified (and publish pushed).
import { describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { DIFF_KIND_ANNOTATION, encodeDiff, type DiffKind } from '../../operator/src/reconcile/diff-config-map.ts';
import { decideDiffWrite, diffPatch } from '../../operator/src/reconcile/diff-write.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { describeDiffWriteContract } from '../support/diff-write-contract.ts';

const STORED = 'diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+stored\n';
const large = `${STORED}${'+line\n'.repeat(200_000)}`; // 1.2 MB: stored compressed

/** A diff ConfigMap of the run's holding `diff`, with the mark `mark` (none: written before the mark existed). */
const found = (mark: string | undefined, diff = STORED) => ({
  metadata: mark === undefined ? {} : { annotations: { [DIFF_KIND_ANNOTATION]: mark } },
  ...encodeDiff(diff),
});

describe('decideDiffWrite', () => {
  it.each<[string, ReturnType<typeof found>, DiffKind, ReturnType<typeof decideDiffWrite>]>([
    ['a snapshot replaces a snapshot', found('snapshot'), 'snapshot', { action: 'replace' }],
    ['a snapshot replaces one written before the mark', found(undefined), 'snapshot', { action: 'replace' }],
    ['a snapshot replaces one whose mark is not a kind (read as a snapshot)', found('Final'), 'snapshot', { action: 'replace' }],
    ['a snapshot never replaces the final diff', found('final'), 'snapshot', { action: 'refuse' }],
    ['the final diff replaces a snapshot', found('snapshot'), 'final', { action: 'replace' }],
    ['the final diff replaces one written before the mark', found(undefined), 'final', { action: 'replace' }],
    [
      "a final diff replaces a final one: a mark anyone may set is never taken for the run's diff",
      found('final'),
      'final',
      { action: 'replace' },
    ],
    ['a final diff replaces a compressed final one', found('final', large), 'final', { action: 'replace' }],
  ])('%s', (_, existing, writing, expected) => {
    expect(decideDiffWrite(existing, writing)).toEqual(expected);
  });
});

describe('diffPatch: the same rule, tested by the API server in the write itself', () => {
  const run = codingRunFixture() as ParsedCodingRun;
  const mark = `/metadata/annotations/${DIFF_KIND_ANNOTATION.replace('/', '~1')}`;

  it('a snapshot applies only over a snapshot (the test precedes every change)', () => {
    const patch = diffPatch(run, STORED, 'snapshot') as Array<{ op: string; path: string; value?: unknown }>;
    const guard = patch.findIndex((op) => op.op === 'test' && op.path === mark);
    expect(patch[guard]).toEqual({ op: 'test', path: mark, value: 'snapshot' });
    expect(patch.findIndex((op) => op.op !== 'test')).toBeGreaterThan(guard);
  });

  it("a final write applies over any mark: it tests only that the ConfigMap is the run's own", () => {
    const patch = diffPatch(run, STORED, 'final') as Array<{ op: string; path: string }>;
    expect(patch.filter((op) => op.op === 'test').map((op) => op.path)).toEqual([
      '/metadata/labels/app.kubernetes.io~1managed-by',
      '/metadata/labels/chamvi.dev~1run-uid',
      '/metadata/ownerReferences/0/uid',
      '/metadata/ownerReferences/0/controller',
    ]);
  });

  it('marks the ConfigMap final only in a final write', () => {
    const sets = (kind: DiffKind) =>
      (diffPatch(run, STORED, kind) as Array<{ op: string; path: string }>).filter((op) => op.op !== 'test' && op.path === mark);
    expect(sets('final')).toEqual([{ op: 'add', path: mark, value: 'final' }]);
    expect(sets('snapshot')).toEqual([]);
  });
});

// Local mode keeps the diff the way the operator does, under the same rule.
describeDiffWriteContract('local mode (memory-run-resources.ts)', async () => {
  const run = codingRunFixture({ metadata: { uid: `uid-${Math.random().toString(36).slice(2)}` } });
  const gateway = new MemoryKubeGateway(run, { configMaps: new Map(), secrets: new Map() }, () => undefined);
  return {
    run: run as ParsedCodingRun,
    resources: memoryRunResources(gateway),
    configMap: async (name) => gateway.configMap(run.metadata.namespace, name),
    put: async (configMap) => gateway.putConfigMap(configMap),
  };
});
