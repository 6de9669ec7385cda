// The finalize job's diff (workers/finalize-job.ts finalDiff) is bounded in time like the one
// keep-diff.ts takes: a sandbox whose toolbox the model's code stopped never answers, and the
// call's default deadline held a worker slot for half an hour at each try. And it costs a
// finished run no request more than it needs (issue #17): a diff equal to the last snapshot is
// not written again; one that differs is one write of kind final, over the snapshot's ConfigMap.
import { describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { diffSha } from '../../operator/src/reconcile/diff-config-map.ts';
import type { CallOptions, Sandbox, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { TAKE_DIFF_TIMEOUT_MS } from '../../operator/src/workers/keep-diff.ts';
import { finalDiff } from '../../operator/src/workers/finalize-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';

const DIFF = 'diff --git a/a b/a\n+x\n';

/** A sandbox that answers DIFF, the calls it was asked, and a writeDiff that records each write. */
function finalizing(snapshot: RunState['diffSnapshot']) {
  const asked: CallOptions[] = [];
  const sandbox = {
    call: (_request: unknown, options: CallOptions) => {
      asked.push(options);
      return Promise.resolve({
        ok: true,
        result: { exitCode: 0, stdout: DIFF, stderr: `${DIFF.length}\n 1 file changed, 1 insertion(+)\n`, stdoutTruncated: false },
      } as unknown as ToolResponse);
    },
  } as unknown as Sandbox;
  const writes: Array<{ diff: string; kind: string; written?: string }> = [];
  const writeDiff = async (_run: unknown, diff: string, write: { kind: string; written?: string }) => {
    writes.push({ diff, ...write });
    return { outcome: 'written', configMap: write.written ?? 'r-diff' };
  };
  const deps = { sandboxes: { for: () => sandbox }, resources: { writeDiff }, logger: { warn: () => undefined } } as never;
  const state = { revision: undefined, diffSnapshot: snapshot } as unknown as RunState;
  return { take: () => finalDiff(deps, {} as ParsedCodingRun, state), asked, writes };
}

describe('finalDiff', () => {
  it('asks the sandbox once, with the bound keep-diff uses', async () => {
    const { take, asked } = finalizing(undefined);
    await take();
    expect(asked).toHaveLength(1);
    expect(asked[0]!.timeoutMs).toBe(TAKE_DIFF_TIMEOUT_MS);
    expect(asked[0]!.signal).toBeInstanceOf(AbortSignal);
  });

  it("writes nothing when the diff equals the last snapshot, and names the snapshot's ConfigMap", async () => {
    const { take, writes } = finalizing({ sha256: diffSha(DIFF), configMap: 'r-diff-abcde' });
    expect(await take()).toMatchObject({ source: 'final', diff: DIFF, configMap: 'r-diff-abcde' });
    expect(writes).toEqual([]);
  });

  it("writes a diff that differs from the last snapshot once, as final, over the snapshot's ConfigMap", async () => {
    const { take, writes } = finalizing({ sha256: diffSha('diff --git a/a b/a\n+older\n'), configMap: 'r-diff-abcde' });
    expect(await take()).toMatchObject({ source: 'final', diff: DIFF, configMap: 'r-diff-abcde' });
    expect(writes).toEqual([{ diff: DIFF, kind: 'final', written: 'r-diff-abcde' }]);
  });

  it('writes the diff of a run that stored no snapshot once, as final', async () => {
    const { take, writes } = finalizing(undefined);
    expect(await take()).toMatchObject({ source: 'final', diff: DIFF, configMap: 'r-diff' });
    expect(writes).toEqual([{ diff: DIFF, kind: 'final' }]);
  });
});
