// An ending without its sandbox (a deadline, a cancel, a lost sandbox, a worker that fails the
// run) keeps the last snapshot a step stored (workers/keep-diff.ts snapshotDiff). A snapshot is
// take-diff's text only, no size: one of a change over 1 MiB is its 1 MiB cut, and was kept as
// whole, so the run's message said nothing of the cut and its counts read as the change's.
import { describe, expect, it } from 'vitest';
import { LIMITS, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { buildDiffConfigMap, diffSha, isCutDiff } from '../../operator/src/reconcile/diff-config-map.ts';
import { countDiff, keptDiffResult, withDiffNote } from '../../operator/src/reconcile/kept-diff.ts';
import { diffConfigMapName } from '../../operator/src/reconcile/names.ts';
import { keepRunDiff } from '../../operator/src/workers/keep-diff.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const line = `+${'x'.repeat(99)}\n`;
const HEADER = 'diff --git a/big b/big\nnew file mode 100644\n--- /dev/null\n+++ b/big\n@@ -0,0 +1,20000 @@\n';
/** take-diff's cut of a 2 MB change, less a split character's bytes. */
const CUT = `${HEADER}${line.repeat(20_000)}`.slice(0, LIMITS.fullDiff - 2);
const WHOLE = `${HEADER.replace('20000', '3')}${line.repeat(3)}`;

/** The ending's view of a run whose diff ConfigMap holds the step's snapshot `stored`. */
async function keptFromSnapshot(stored: string) {
  const run = codingRunFixture({}) as ParsedCodingRun;
  const gateway = new MemoryKubeGateway(run, { configMaps: new Map(), secrets: new Map() }, () => undefined);
  gateway.putConfigMap(buildDiffConfigMap(run, stored, 'snapshot'));
  const deps = { resources: memoryRunResources(gateway), logger: { warn: () => undefined } };
  return keepRunDiff(deps, run, undefined, { diffSnapshot: { sha256: diffSha(stored), configMap: diffConfigMapName(run) } });
}

describe('an ending that keeps the snapshot', () => {
  it('takes a snapshot as long as the 1 MiB cut for a cut, and says so in the message', async () => {
    const kept = await keptFromSnapshot(CUT);
    expect(kept).toMatchObject({ source: 'snapshot', diff: CUT, truncated: true, ...countDiff(CUT) });
    expect(withDiffNote('The run was cancelled.', kept)).toMatch(
      /^The run was cancelled\. The change is larger than the 1 MiB the operator keeps: .*only its first 1 MiB\.$/,
    );
    const result = keptDiffResult(kept, '');
    expect(result.diffTruncated).toBe(true);
    // What continueFrom and an eval's graders read of it agrees.
    expect(isCutDiff(kept.diff, result)).toBe(true);
  });

  it('takes a shorter snapshot for the whole change', async () => {
    const kept = await keptFromSnapshot(WHOLE);
    expect(kept).toMatchObject({ source: 'snapshot', truncated: false, filesChanged: 1, insertions: 3 });
    expect(withDiffNote('The run was cancelled.', kept)).toBe('The run was cancelled.');
  });
});
