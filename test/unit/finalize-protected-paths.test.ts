// The finalize job of a run whose check passed but whose diff changes spec.verify.protect paths
// (workers/finalize-job.ts). The paths are restored before the check, and docs/verify.md tells
// the approver they show no change; but the diff is taken after the check, and what the check
// ran (a module the tests import that rewrites them at exit, a clean filter) can change them
// then. Such a run ended Succeeded "Verification passed". Now it ends Failed VerificationFailed,
// naming the first such path on one line, with the diff kept. The sandbox is a stand-in that
// answers the diff; git reads it for real (workers/diff-patch-lists.ts).
import { describe, expect, it } from 'vitest';
import type { CodingRunStatus, ParsedCodingRun } from '../../operator/src/api/index.ts';
import type { Sandbox, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { runFinalizeJob } from '../../operator/src/workers/finalize-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { runningCodingRun } from '../support/running-coding-run.ts';

const ref = { uid: 'uid-1', namespace: 'ns', name: 'r' };

/** A patch of one file as git writes it, its name spelled by `name` for each side (`a/x`, or git-quoted `"a/x\ny"`). */
const patch = (name: (side: 'a' | 'b') => string) =>
  `diff --git ${name('a')} ${name('b')}\n--- ${name('a')}\n+++ ${name('b')}\n@@ -1 +1 @@\n-old\n+new\n`;
const plain = (path: string) => (side: string) => `${side}/${path}`;
/** A name git quotes: `escaped` as git escapes it (\" and \n). */
const quoted = (escaped: string) => (side: string) => `"${side}/${escaped}"`;

/** A diff that edits src/app.js and, after it, the file `also` names, if any. */
const diffTouching = (also?: (side: 'a' | 'b') => string) => patch(plain('src/app.js')) + (also ? patch(also) : '');

/** A patch adding src/big.js of over 1 MiB: the take keeps its first 1 MiB, cut in the hunk. */
const longNewFile = () =>
  'diff --git a/src/big.js b/src/big.js\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/src/big.js\n' +
  `@@ -0,0 +1,40000 @@\n${'+const x = "0123456789012345678901234567890";\n'.repeat(40_000)}`;

/** A run whose model finished at step 2 and whose check (protecting test/) passed, its finalize about to take `diff`. */
function finishing(diff: string) {
  const run = runningCodingRun(ref, {
    budget: { maxSteps: 20, timeout: '30m' },
    verify: { command: 'npm test', protect: ['test'], required: true, retries: 0, timeout: '10m' },
  } as never);
  const verification = { passed: true, exitCode: 0, outputTail: 'ok', durationMs: 1000, attempts: 1 };
  const state = {
    ...ref,
    stage: 'finalizing',
    step: 2,
    toolCalls: 3,
    usage: { totalTokens: 100 },
    startedAt: Date.now(),
    finalText: 'Fixed the login.',
    verification: { ...verification, step: 2 },
    verificationNote: 'Verification passed: `npm test` exited 0 in 1.0s.',
  } as unknown as RunState;
  const sandbox = {
    call: async () =>
      ({
        ok: true,
        result: { exitCode: 0, stdout: diff, stderr: `${Buffer.byteLength(diff)}\n`, stdoutTruncated: false },
      }) as unknown as ToolResponse,
  } as unknown as Sandbox;
  const events: Array<{ type: string; reason: string; message: string }> = [];
  const published: string[] = [];
  const deps = {
    states: { load: async () => state, save: async () => undefined, delete: async () => undefined },
    getRun: async () => run,
    sandboxes: { for: () => sandbox, release: async () => undefined },
    resources: { writeDiff: async () => ({ outcome: 'written', configMap: 'r-diff' }) },
    clonePolicy: { allowRepo: ['**'], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 1_000 },
    status: {
      write: async (_n: string, _name: string, _uid: string, change: (status: CodingRunStatus, current: unknown) => CodingRunStatus) => {
        run.status = change(structuredClone(run.status!), run);
        return { written: true, run };
      },
    },
    events: { record: async (_run: unknown, event: { type: string; reason: string; message: string }) => void events.push(event) },
    queue: { publish: async () => void published.push('publish') },
    transcript: { append: async () => undefined },
    metrics: { observePhases: () => undefined, runsFinished: { inc() {} }, runDuration: { observe() {} } },
    logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
    now: () => new Date(),
  } as unknown as AgentDependencies;
  return { run: run as ParsedCodingRun, deps, events, finalize: () => runFinalizeJob(deps, ref) };
}

describe('finalizing a run whose check passed', () => {
  it('ends it Failed VerificationFailed when its diff changes a protected path, naming it and keeping the diff', async () => {
    const diff = diffTouching(plain('test/login.test.js'));
    const f = finishing(diff);
    await f.finalize();
    expect(f.run.status).toMatchObject({
      phase: 'Failed',
      reason: 'VerificationFailed',
      result: { diff, diffConfigMap: 'r-diff', verification: { passed: true } },
    });
    expect(f.run.status!.message).toMatch(
      /^Verification failed: the diff changes "test\/login.test.js", which spec.verify.protect protects, though the protected paths were restored before the check; the diff is kept\./,
    );
    expect(f.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'VerificationFailed' });
  });

  it('names a hostile path on one line, as git reads it', async () => {
    const f = finishing(diffTouching(quoted('test/we\\"ird\\nname.js')));
    await f.finalize();
    expect(f.run.status).toMatchObject({ phase: 'Failed', reason: 'VerificationFailed' });
    expect(f.run.status!.message).not.toContain('\n');
    expect(f.run.status!.message).toContain('the diff changes "test/we\\"ird^Jname.js"');
  });

  it('judges the whole patches of a diff cut at 1 MiB as git reads them: a ---/+++ patch no header names fails it', async () => {
    // git refuses the cut last patch as corrupt; the traditional patch before it is whole, and
    // git reads it though no `diff --git` header names it.
    const hidden =
      '--- a/test/login.test.js\n+++ b/test/login.test.js\n@@ -1 +1 @@\n-expect(login()).toBe(true)\n+expect(true).toBe(true)\n';
    const f = finishing(diffTouching() + hidden + longNewFile());
    await f.finalize();
    expect(f.run.status).toMatchObject({ phase: 'Failed', reason: 'VerificationFailed', result: { diffTruncated: true } });
    expect(f.run.status!.message).toContain('the diff changes "test/login.test.js"');
  });

  it('fails a run whose diff is cut at 1 MiB when git refuses a patch before the cut: what it changes is not known', async () => {
    const corrupt = 'diff --git a/src/app.js b/src/app.js\n--- a/src/app.js\n+++ b/src/app.js\n@@ -1,3 +1,3 @@\n-old\n';
    const f = finishing(corrupt + patch(plain('src/other.js')) + longNewFile());
    await f.finalize();
    expect(f.run.status).toMatchObject({ phase: 'Failed', reason: 'VerificationFailed', result: { diffTruncated: true } });
    expect(f.run.status!.message).toMatch(/^Verification failed: git apply --numstat could not read the diff: .*cannot be shown unchanged/);
  });

  it('ends a run whose diff is cut at 1 MiB Succeeded when its whole patches leave the protected paths alone', async () => {
    const f = finishing(diffTouching() + longNewFile());
    await f.finalize();
    expect(f.run.status).toMatchObject({ phase: 'Succeeded', reason: 'Completed', result: { diffTruncated: true } });
  });

  it('ends it Succeeded when its diff leaves the protected paths alone', async () => {
    const f = finishing(diffTouching());
    await f.finalize();
    expect(f.run.status).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    expect(f.run.status!.message).toContain('Verification passed');
  });
});
