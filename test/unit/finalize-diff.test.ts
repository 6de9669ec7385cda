// The finalize job's diff (workers/finalize-job.ts finalDiff) is bounded in time like the one
// keep-diff.ts takes: a sandbox whose toolbox the model's code stopped never answers, and the
// call's default deadline held a worker slot for half an hour at each try.
import { describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { diffSha } from '../../operator/src/reconcile/diff-config-map.ts';
import type { CallOptions, Sandbox, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { TAKE_DIFF_TIMEOUT_MS } from '../../operator/src/workers/keep-diff.ts';
import { finalDiff } from '../../operator/src/workers/finalize-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';

describe('finalDiff', () => {
  it('asks the sandbox with the bound keep-diff uses, and keeps the snapshot its diff equals', async () => {
    const diff = 'diff --git a/a b/a\n+x\n';
    const asked: CallOptions[] = [];
    const sandbox = {
      call: (_request: unknown, options: CallOptions) => {
        asked.push(options);
        return Promise.resolve({
          ok: true,
          result: { exitCode: 0, stdout: diff, stderr: `${diff.length}\n 1 file changed, 1 insertion(+)\n`, stdoutTruncated: false },
        } as unknown as ToolResponse);
      },
    } as unknown as Sandbox;
    const state = { revision: undefined, diffSnapshot: { sha256: diffSha(diff), configMap: 'r-diff' } } as unknown as RunState;
    const deps = { sandboxes: { for: () => sandbox }, resources: {}, logger: { warn: () => undefined } } as never;
    const kept = await finalDiff(deps, {} as ParsedCodingRun, state);
    expect(kept).toMatchObject({ source: 'final', diff, configMap: 'r-diff' });
    expect(asked).toHaveLength(1);
    expect(asked[0]!.timeoutMs).toBe(TAKE_DIFF_TIMEOUT_MS);
    expect(asked[0]!.signal).toBeInstanceOf(AbortSignal);
  });
});
