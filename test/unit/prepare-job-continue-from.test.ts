// spec.continueFrom in the prepare job: the source is the run the follow-up was accepted with
// (status.continuedFrom's uid). One deleted and created again under its name since fails the
// follow-up ContinueFromReplaced before its diff ConfigMap is read or anything is cloned; the
// run accepted still continues, and a run accepted before the pin existed finds its source by
// name as before.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { codingRunSpec, type CodingRun, type CodingRunStatus } from '../../operator/src/api/index.ts';
import { buildDiffConfigMap, type DiffConfigMap } from '../../operator/src/reconcile/diff-config-map.ts';
import { runAgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { gitRepository, prepareJobHarness } from '../support/prepare-job-harness.ts';

const scratch = mkdtempSync(join(tmpdir(), 'prepare-continue-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const repository = gitRepository(scratch);
const url = `file://${repository}`;
const revision = execFileSync('git', ['-C', repository, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
const DIFF = 'diff --git a/NOTES.md b/NOTES.md\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.md\n@@ -0,0 +1 @@\n+first notes\n';

const prepareJob = { name: 'prepare' as const, data: { uid: 'uid-1', namespace: 'ns', name: 'r' }, attempt: 1, attempts: 10 };

/** A finished run `first` of the repository, with uid `uid`, and its own diff ConfigMap. */
function source(uid: string): { run: CodingRun; configMap: DiffConfigMap } {
  const run = codingRunFixture({
    metadata: { name: 'first', namespace: 'ns', uid },
    spec: { repository: { url } },
    status: {
      phase: 'Succeeded',
      reason: 'Completed',
      result: {
        summary: 'Left notes.',
        diff: DIFF,
        diffTruncated: false,
        diffConfigMap: 'first-diff',
        revision,
        filesChanged: 1,
        insertions: 1,
        deletions: 0,
      },
    },
  });
  return { run, configMap: buildDiffConfigMap({ ...run, spec: codingRunSpec.parse(run.spec) }, DIFF) as DiffConfigMap };
}

/** The follow-up's prepare job, the run named `first` being `found`; `status` is the follow-up's. */
function followUp(found: ReturnType<typeof source>, status: CodingRunStatus) {
  const harness = prepareJobHarness(url, [`file://${scratch}/*`], { status });
  harness.run.spec.continueFrom = { name: 'first' };
  const diffReads: string[] = [];
  harness.deps.getRun = async (_namespace, name) => (name === 'first' ? found.run : harness.run);
  harness.deps.resources.readDiffConfigMap = async (_namespace, name) => {
    diffReads.push(name);
    return name === 'first-diff' ? found.configMap : undefined;
  };
  return { ...harness, diffReads };
}

const accepted = (uid: string): CodingRunStatus => ({ phase: 'Running', continuedFrom: { name: 'first', uid } });

describe('the prepare job continues only from the run the follow-up was accepted with', () => {
  it('fails ContinueFromReplaced when the source was deleted and created again since, reading nothing of it', async () => {
    const { deps, seen, diffReads } = followUp(source('uid-recreated'), accepted('uid-first'));
    await runAgentJob(deps, prepareJob);
    expect(seen.statuses).toHaveLength(1);
    expect(seen.statuses[0]).toMatchObject({ phase: 'Failed', reason: 'ContinueFromReplaced' });
    expect(seen.statuses[0]!.message).toContain('uid uid-first then, uid-recreated now');
    expect(diffReads).toEqual([]);
    expect(seen.sandboxes).toBe(0);
  });

  it.each([
    ['the run it was accepted with', accepted('uid-first')],
    ['the run of the name, for a run accepted before the pin existed (no status.continuedFrom)', { phase: 'Running' as const }],
  ])('goes on to the clone and the sandbox with the diff ConfigMap of %s', async (_, status) => {
    const { deps, seen, diffReads } = followUp(source('uid-first'), status);
    // The job reads the source's diff and asks for the sandbox, which this test does not have.
    await expect(runAgentJob(deps, prepareJob)).rejects.toThrow('no sandbox in this test');
    expect(seen.statuses).toEqual([]);
    expect(diffReads).toEqual(['first-diff']);
    expect(seen.sandboxes).toBe(1);
  });
});
