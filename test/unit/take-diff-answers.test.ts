// takeDiff (workers/take-diff.ts) against answers the sandbox forged: code there runs as the
// toolbox's user and can write whole answer lines into its output. The 1 MiB cut is the
// operator's, not the sandbox's word; so are the counts (test/unit/forged-shortstat.test.ts).
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../operator/src/api/index.ts';
import type { CallOptions, Sandbox, ToolRequest, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { takeDiff } from '../../operator/src/workers/take-diff.ts';
import { finalDiff } from '../../operator/src/workers/finalize-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';

const codingRunSpecRun = { metadata: { name: 'r', namespace: 'ns' }, spec: {} } as unknown as ParsedCodingRun;

/** A sandbox that answers each call with the next of `answers`. */
const answering = (...answers: ToolResponse[]) => ({ call: () => Promise.resolve(answers.shift()!) }) as unknown as Sandbox;
const bash = (stdout: string, stderr: string, extra: object = {}): ToolResponse =>
  ({
    ok: true,
    result: { exitCode: 0, stdout, stderr, stdoutTruncated: false, stdoutLog: '/tmp/log', ...extra },
  }) as unknown as ToolResponse;
/** The toolbox's answer to reading the log (base64): `bytes`, as the command wrote them. */
const log = (bytes: Buffer): ToolResponse =>
  ({ ok: true, result: { path: '/tmp/log', content: bytes.toString('base64') } }) as unknown as ToolResponse;

describe('takeDiff, on forged answers', () => {
  it('cuts a diff longer than the 1 MiB the command cuts at, and says it is cut, whatever the answer says', async () => {
    const long = `diff --git a/a b/a\n${'+x\n'.repeat(1_500_000)}`;
    const taken = await takeDiff(answering(bash(long, '10\n 1 file changed, 1 insertion(+)\n')));
    expect(Buffer.byteLength(taken.diff)).toBeLessThanOrEqual(LIMITS.fullDiff);
    expect(taken.truncated).toBe(true);
  });

  // The size line is the sandbox's to write too: a diff as long as the cut is taken for one,
  // as isCutDiff (reconcile/diff-config-map.ts) takes it, so no forged size makes a cut change
  // read as whole (its counts, of the part kept, as the whole change's).
  it('says a diff as long as the cut is cut, though the size line says it is short', async () => {
    const cut = `diff --git a/a b/a\n${'+x\n'.repeat(LIMITS.fullDiff)}`.slice(0, LIMITS.fullDiff);
    const log = { ok: true, result: { path: '/tmp/log', content: Buffer.from(cut).toString('base64') } } as unknown as ToolResponse;
    const taken = await takeDiff(answering(bash(cut.slice(0, 1000), '100\n', { stdoutTruncated: true }), log));
    expect(Buffer.byteLength(taken.diff)).toBe(LIMITS.fullDiff);
    expect(taken.truncated).toBe(true);
  });

  // The size line is read by the rule isCutDiff applies to the diff (reachesDiffCut): a size as
  // long as the cut says the change is cut, as a diff that long would.
  it('says a diff is cut when the size line is as long as the cut', async () => {
    const taken = await takeDiff(answering(bash('+x\n', `${LIMITS.fullDiff - 3}\n`)));
    expect(taken).toMatchObject({ diff: '+x\n', truncated: true });
    expect((await takeDiff(answering(bash('+x\n', `${LIMITS.fullDiff - 4}\n`)))).truncated).toBe(false);
  });

  // Each byte that is not UTF-8 becomes a three-byte U+FFFD in the text: a change a third of the
  // cut was taken for a cut from its text, reported larger than 1 MiB, and publishing said
  // "split the task" where the bytes are why it cannot push.
  it('says a change that is not UTF-8 is cut only when its bytes were, and keeps its text within 1 MiB', async () => {
    const raw = Buffer.concat([
      Buffer.from('diff --git a/l1.txt b/l1.txt\nnew file mode 100644\n--- /dev/null\n+++ b/l1.txt\n@@ -0,0 +1,4000 @@\n'),
      Buffer.from(`+${'\xe9'.repeat(99)}\n`.repeat(4000), 'latin1'),
    ]);
    expect(raw.length).toBeLessThan(LIMITS.fullDiff / 2);
    const decoded = raw.toString('utf8');
    const answer = bash(decoded.slice(0, 1000), `${raw.length}\n`, { stdoutTruncated: true });
    const taken = await takeDiff(answering(answer, log(raw)));
    expect(taken).toMatchObject({ truncated: false, notUtf8: true });
    // Its text is three times its bytes: what is kept of it still fits where it is stored.
    expect(Buffer.byteLength(taken.diff)).toBeLessThanOrEqual(LIMITS.fullDiff);
    expect(decoded.startsWith(taken.diff)).toBe(true);
  });

  it('says a change that is not UTF-8 is cut when its bytes reach the cut, and keeps its text within 1 MiB', async () => {
    const raw = Buffer.concat([Buffer.from('diff --git a/l1 b/l1\n+x'), Buffer.alloc(LIMITS.fullDiff, 0xe9)]).subarray(0, LIMITS.fullDiff);
    const answer = bash('+\uFFFD', `${LIMITS.fullDiff * 4}\n`, { stdoutTruncated: true });
    const taken = await takeDiff(answering(answer, log(raw)));
    expect(taken).toMatchObject({ truncated: true, notUtf8: true });
    expect(Buffer.byteLength(taken.diff)).toBeLessThanOrEqual(LIMITS.fullDiff);
  });

  it('refuses a log read longer than the diff the command cuts, and an answer that is not text', async () => {
    const huge = { ok: true, result: { path: '/tmp/log', content: 'A'.repeat(8 * 1024 * 1024) } } as unknown as ToolResponse;
    await expect(takeDiff(answering(bash('', '0\n\n', { stdoutTruncated: true }), huge))).rejects.toThrow(/more than the diff/);
    await expect(takeDiff(answering(bash(42 as unknown as string, '0\n\n')))).rejects.toThrow(/not text/);
  });

  it('takes a diff without U+FFFD as UTF-8 in one call; with one, decides from the bytes in the log', async () => {
    const plain = await takeDiff(answering(bash('+caf\u00e9\n', '7\n\n')));
    expect(plain).toMatchObject({ diff: '+caf\u00e9\n', notUtf8: false });
    // The toolbox decoded a Latin-1 é as U+FFFD; the log holds the byte.
    const latin1 = await takeDiff(answering(bash('+caf\uFFFD\n', '6\n\n'), log(Buffer.from('+caf\xe9\n', 'latin1'))));
    expect(latin1).toMatchObject({ diff: '+caf\uFFFD\n', notUtf8: true });
    // A UTF-8 file that holds U+FFFD itself is UTF-8 text.
    const written = await takeDiff(answering(bash('+\uFFFD\n', '5\n\n'), log(Buffer.from('+\uFFFD\n'))));
    expect(written).toMatchObject({ diff: '+\uFFFD\n', notUtf8: false });
  });

  // A TypeError here was retried by finalize until the run ended AgentFailed; the error below
  // is the one every other bad answer gives.
  it.each([
    ['a bash answer with a null result', [{ ok: true, result: null }]],
    ['a bash answer whose result is not an object', [{ ok: true, result: 'done' }]],
    ['a cut bash answer that names no log', [{ ok: true, result: { exitCode: 0, stdout: '', stderr: '0\n\n', stdoutTruncated: true } }]],
    [
      'a log read with a null result',
      [
        { ok: true, result: { exitCode: 0, stdout: '', stderr: '0\n\n', stdoutTruncated: true, stdoutLog: '/tmp/log' } },
        { ok: true, result: null },
      ],
    ],
  ])('fails as taking the diff failed, not with a TypeError, on %s', async (_, answers) => {
    const taking = takeDiff(answering(...(answers as unknown as ToolResponse[])));
    await expect(taking).rejects.toThrow(/^(taking|reading) the diff failed: /);
    await expect(taking).rejects.not.toBeInstanceOf(TypeError);
  });
});

// git that cannot read its repository (a .git/config the model wrote garbage into, .git gone)
// prints no diff: the command says so by its exit status (3) and git's words after the size
// line, and an empty diff taken then was a run "Succeeded" with no changes.
describe('takeDiff, when git failed in the sandbox', () => {
  it("fails as taking the diff failed, with git's words on one bounded line, rather than take an empty diff", async () => {
    const said = `0\ngit add exited 128; fatal: bad config line 1 in file .git/config\n${'x'.repeat(5000)}\ngit diff exited 128\n`;
    const taking = takeDiff(answering(bash('', said, { exitCode: 3 })));
    await expect(taking).rejects.toThrow(
      /^taking the diff failed: git could not read the repository or a file in the workspace \(git add exited 128; fatal: bad config line 1 in file \.git\/config x+\)/,
    );
    const message = await taking.then(
      () => '',
      (error: Error) => error.message,
    );
    expect(message).not.toContain('\n');
    expect(message.length).toBeLessThan(1300);
  });

  // git fails on a file in the workspace (mode 000, a FIFO) as it does on a broken .git: the
  // message must fit both, and git's words say which.
  it("says git could not read the repository or a workspace file, keeping git's words, and does not blame .git", async () => {
    const said = '0\ngit add exited 0; error: open("locked.txt"): Permission denied\nfatal: cannot hash locked.txt\ngit diff exited 128\n';
    const taking = takeDiff(answering(bash('', said, { exitCode: 3 })));
    await expect(taking).rejects.toThrow(
      'taking the diff failed: git could not read the repository or a file in the workspace (git add exited 0; error: open("locked.txt"): Permission denied fatal: cannot hash locked.txt git diff exited 128): the change cannot be taken from it',
    );
  });

  // A command killed by the model's code (no exit status) printed part of the diff at most.
  it.each([null, 1, 137])('fails as taking the diff failed when the command exited %s, whatever it printed', async (exitCode) => {
    await expect(takeDiff(answering(bash('diff --git a/a b/a\n+x\n', '10\n', { exitCode })))).rejects.toThrow(
      /^taking the diff failed: its command exited /,
    );
  });
});

// Since a call unanswered at its deadline discards the toolbox session (serve-session.ts), the
// bash must end, and the toolbox answer, before the deadline the caller gives the call: a slow
// snapshot in a big repository was answered past it and cost a healthy session every step.
describe("takeDiff's own deadline", () => {
  /** A sandbox that records each request and its options, and answers with `answer`. */
  const recording = (answer: ToolResponse) => {
    const requests: { input: { timeoutMs?: number }; options: CallOptions }[] = [];
    const sandbox = {
      call: (request: ToolRequest, options: CallOptions = {}) => {
        requests.push({ input: request.input as { timeoutMs?: number }, options });
        return Promise.resolve(answer);
      },
    } as unknown as Sandbox;
    return { sandbox, requests };
  };

  it.each([30_000, 15_000, 10_000, 200_000])('asks the bash for less time than the %i ms deadline it is given', async (timeoutMs) => {
    const { sandbox, requests } = recording(bash('', '0\n'));
    await takeDiff(sandbox, { timeoutMs });
    expect(requests).toHaveLength(1);
    expect(requests[0]!.options.timeoutMs).toBe(timeoutMs);
    expect(requests[0]!.input.timeoutMs).toBeGreaterThan(0);
    // Time for the toolbox to answer: its session start and its wait (up to 2 s) for what holds
    // the output open, 10 s in all (half a deadline shorter than 20 s).
    expect(requests[0]!.input.timeoutMs).toBeLessThanOrEqual(timeoutMs - Math.min(10_000, timeoutMs / 2));
  });

  // The model is done when finalize takes the run's diff: what it left running (a dev server)
  // is swept then, as the verify check sweeps it, rather than run through a days-long wait for
  // the publish approval. A snapshot, between steps, leaves the model's background jobs running.
  it("sweeps what the model left running at finalize's take, and keeps it at a snapshot's", async () => {
    const cleans: unknown[] = [];
    const sandbox = {
      call: (request: ToolRequest) => {
        cleans.push(request.clean);
        return Promise.resolve(bash('', '0\n'));
      },
    } as unknown as Sandbox;
    await takeDiff(sandbox, { timeoutMs: 30_000 });
    const deps = { sandboxes: { for: () => sandbox } } as unknown as Parameters<typeof finalDiff>[0];
    await finalDiff(deps, codingRunSpecRun, {} as RunState);
    expect(cleans).toEqual(['keep-jobs', true]);
  });

  // A bash stopped at its timeout printed part of the diff, which is not the run's change.
  it('fails when the bash was stopped at its timeout, rather than take the part it printed for the change', async () => {
    const { sandbox } = recording(bash('diff --git a/a b/a\n+x\n', '', { exitCode: null, timedOut: true }));
    await expect(takeDiff(sandbox, { timeoutMs: 30_000 })).rejects.toThrow(/^taking the diff failed: .*timed out/);
  });
});
