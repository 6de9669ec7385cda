// status.result's counts (filesChanged, insertions, deletions) are the operator's count of the
// diff it keeps, never the `git diff --shortstat` the sandbox prints: that is the model's to
// write (a `git` shim or alias in the repository, a wrapper on PATH, or files edited between
// two git invocations), and filesChanged is what a finished run's message reports. The
// sandbox here answers the take-diff command with a forged stderr, as such code can.
import { describe, expect, it } from 'vitest';
import { LIMITS, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { countDiff, keptDiffResult, withDiffNote } from '../../operator/src/reconcile/kept-diff.ts';
import { loopOutcome } from '../../operator/src/reconcile/run-status-transitions.ts';
import type { Sandbox, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { finalDiff } from '../../operator/src/workers/finalize-job.ts';
import { takeSandboxDiff } from '../../operator/src/workers/keep-diff.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';

const fileDiff = (name: string, added: number, removed = 0) =>
  `diff --git a/${name} b/${name}\n--- a/${name}\n+++ b/${name}\n@@ -1,${removed} +1,${added} @@\n` +
  `${'-old\n'.repeat(removed)}${'+new\n'.repeat(added)}`;
/** Two files: 3 lines added, 1 removed. */
const DIFF = `${fileDiff('a.txt', 2, 1)}${fileDiff('b.txt', 1)}`;

/** A sandbox whose answer to the take-diff command is `stdout`, with `stderr` as the command's header. */
const answering = (stdout: string, stderr: string) =>
  ({
    call: () =>
      Promise.resolve({
        ok: true,
        result: { exitCode: 0, stdout, stderr, stdoutTruncated: false, stdoutLog: '/tmp/log' },
      } as unknown as ToolResponse),
  }) as unknown as Sandbox;

describe('status.result counts the diff it keeps, whatever shortstat the sandbox prints', () => {
  it.each([
    ['no change at all', ' 0 files changed\n'],
    ['fewer changes than the diff shows', ' 1 file changed, 1 insertion(+)\n'],
    ['more changes than the diff shows', ' 500 files changed, 90000 insertions(+), 7 deletions(-)\n'],
    ['a count no status holds', ' 99999999999999999999 files changed\n'],
    ['nothing', ''],
  ])('a forged shortstat claiming %s', async (_, shortstat) => {
    const kept = await takeSandboxDiff(answering(DIFF, `${Buffer.byteLength(DIFF)}\n${shortstat}`));
    expect(kept).toMatchObject({ diff: DIFF, filesChanged: 2, insertions: 3, deletions: 1 });
    expect(keptDiffResult(kept, 'Done.')).toMatchObject({ filesChanged: 2, insertions: 3, deletions: 1 });
  });

  it("the finished run's message and result count the diff, not the sandbox's word", async () => {
    const deps = {
      sandboxes: { for: () => answering(DIFF, `${Buffer.byteLength(DIFF)}\n 0 files changed\n`) },
      resources: { writeDiff: () => Promise.resolve({ outcome: 'written', configMap: 'r-diff' }) },
      logger: { warn: () => undefined },
    } as never;
    const kept = await finalDiff(deps, {} as ParsedCodingRun, { revision: undefined } as unknown as RunState);
    expect(loopOutcome({ steps: 3, stop: undefined, filesChanged: kept.filesChanged }).message).toBe(
      'Finished in 3 step(s): 2 file(s) changed.',
    );
    expect(keptDiffResult(kept, '')).toMatchObject({ filesChanged: 2, insertions: 3, deletions: 1, diffConfigMap: 'r-diff' });
  });

  it('counts the kept part of a change cut at 1 MiB, never less than it shows, and the message says it is a cut', async () => {
    const big = `${fileDiff('a.txt', 2, 1)}diff --git a/big b/big\n--- a/big\n+++ b/big\n@@ -0,0 +1,200000 @@\n${'+x'.repeat(200_000).replaceAll('x+', 'x\n+')}\n`;
    const cut = big.slice(0, LIMITS.fullDiff);
    const kept = await takeSandboxDiff(answering(cut, `${Buffer.byteLength(big) * 10}\n 1 file changed\n`));
    expect(kept.truncated).toBe(true);
    expect(kept).toMatchObject(countDiff(cut));
    expect(kept.filesChanged).toBe(2);
    expect(kept.insertions).toBeGreaterThan(100_000);
    expect(withDiffNote('Finished in 1 step(s): 2 file(s) changed.', kept)).toMatch(
      /^Finished in 1 step\(s\): 2 file\(s\) changed\. The change is larger than the 1 MiB the operator keeps: .*first 1 MiB/,
    );
  });

  // 404 108 bytes of change, 4 000 Latin-1 lines: its text (each byte a three-byte U+FFFD) is
  // over 1 MiB. It was said to be larger than 1 MiB, counted 3507 of its 4000 lines as though
  // whole, and kept as 1 048 577 bytes; publishing said "split the task", not why it cannot push.
  it('says a change that is not UTF-8 is not cut when its bytes are not, and that its text is kept and counted in part', async () => {
    const raw = Buffer.concat([
      Buffer.from('diff --git a/l1.txt b/l1.txt\nnew file mode 100644\n--- /dev/null\n+++ b/l1.txt\n@@ -0,0 +1,4000 @@\n'),
      Buffer.from(`+${'\xe9'.repeat(99)}\n`.repeat(4000), 'latin1'),
    ]);
    const sandbox = {
      call: ({ tool }: { tool: string }) =>
        Promise.resolve(
          (tool === 'bash'
            ? {
                ok: true,
                result: { exitCode: 0, stdout: '+\uFFFD', stderr: `${raw.length}\n`, stdoutTruncated: true, stdoutLog: '/tmp/log' },
              }
            : { ok: true, result: { path: '/tmp/log', content: raw.toString('base64') } }) as unknown as ToolResponse,
        ),
    } as unknown as Sandbox;
    const kept = await takeSandboxDiff(sandbox);
    expect(kept).toMatchObject({ truncated: false, notUtf8: true, ...countDiff(kept.diff) });
    expect(kept.filesChanged).toBe(1);
    expect(Buffer.byteLength(kept.diff)).toBeLessThanOrEqual(LIMITS.fullDiff);
    expect(kept.insertions).toBeLessThan(4000);
    const message = withDiffNote('Finished in 1 step(s): 1 file(s) changed.', kept);
    expect(message).not.toMatch(/The change is larger than/);
    expect(message).toMatch(/not UTF-8 text.*diffConfigMap holds, and status\.result counts, only its first 1 MiB/);
  });
});
