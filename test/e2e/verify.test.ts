// spec.verify on the whole product (operator process, real Redis, kwok pods running the real
// toolbox, real git, the scripted model): the operator runs the check after the model
// finishes; required, optional and retried checks end the run as the README says; a protected
// test cannot be edited through a file tool, and an edit through bash does not change the grade.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TranscriptEntry } from '../../operator/src/record/transcript-entry.ts';
import { kubectl } from '../support/cluster.ts';
import { startE2eOperator, type E2eOperator } from '../support/e2e-operator.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, finishedRun } from '../support/namespaced-runs.ts';
import { runPlugin } from '../support/plugin.ts';

const NS = 'e2e-verify';

interface RunStatus {
  phase?: string;
  reason?: string;
  message?: string;
  steps?: number;
  result?: {
    diff: string;
    verification?: { passed: boolean; exitCode?: number; outputTail: string; durationMs: number; attempts: number };
  };
}

const REPOSITORY = {
  'README.md': 'Hello\n',
  'greet.sh': 'echo "Helo, $1"\n',
  // The check: what the run is graded by, and what a cheating model would like to change.
  'test/greet.test.sh':
    'out=$(sh greet.sh world)\n' +
    'if [ "$out" = "Hello, world" ]; then echo "ok: $out"; else echo "FAIL: expected \'Hello, world\', got \'$out\'"; exit 1; fi\n',
};
const CHECK = 'sh test/greet.test.sh';
const FIX = { toolName: 'edit_file', input: { path: 'greet.sh', oldString: 'Helo', newString: 'Hello' } };
const README_EDIT = { toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } };

let root: string;
let repoUrl: string;
let e2e: E2eOperator;

const script = (name: string, turns: object[]) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data: { 'script.json': JSON.stringify({ turns }) },
});
const codingRun = (name: string, verify: object) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name },
  spec: {
    task: 'Make greet.sh print "Hello, <name>".',
    repository: { url: repoUrl },
    model: { provider: 'scripted', scriptRef: { name } },
    verify: { command: CHECK, timeout: '60s', ...verify },
  },
});
/** A run and its script under one name. */
const runWith = (name: string, turns: object[], verify: object = {}) => [script(name, turns), codingRun(name, verify)];

const finished = (name: string) => finishedRun<RunStatus>(NS, name, 150_000);

async function transcript(name: string): Promise<TranscriptEntry[]> {
  const logs = await runPlugin(['logs', name, '-n', NS, '-o', 'json']);
  expect(logs.code, logs.stderr).toBe(0);
  return logs.stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as TranscriptEntry);
}

async function eventReasons(name: string): Promise<Array<{ reason: string; message: string }>> {
  const uid = (await kubectl(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
  const listed = await kubectl(['get', 'events', '-n', NS, '--field-selector', `involvedObject.uid=${uid}`, '-o', 'json']);
  return (JSON.parse(listed.stdout) as { items: Array<{ reason: string; message: string }> }).items.map(({ reason, message }) => ({
    reason,
    message,
  }));
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-verify-'));
  repoUrl = createBareRepository(root, REPOSITORY);
  e2e = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-verify',
    redisPrefix: `verify${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
    // A shared machine may be slow to start a process; the runs themselves have their own bounds.
    syncTimeoutMs: 120_000,
  });
  // Every run at once: they are independent, and the operator runs them side by side.
  await applyIn(NS, [
    ...runWith('passes', [{ toolCalls: [FIX] }, { text: 'Fixed the greeting.' }]),
    ...runWith('fails-required', [{ toolCalls: [README_EDIT] }, { text: 'Done.' }]),
    ...runWith('fails-optional', [{ toolCalls: [README_EDIT] }, { text: 'Done.' }], { required: false }),
    ...runWith('retry-fixes', [{ text: 'Done, I think.' }, { toolCalls: [FIX] }, { text: 'Fixed it after the check failed.' }], {
      retries: 2,
    }),
    ...runWith('retries-run-out', [{ text: 'Done.' }, { text: 'Still done.' }, { text: 'never asked' }], { retries: 1 }),
    ...runWith(
      'protected',
      [
        { toolCalls: [{ toolName: 'write_file', input: { path: 'test/greet.test.sh', content: 'echo ok\n' } }] },
        {
          toolCalls: [
            { toolName: 'bash', input: { command: "printf 'echo ok\\n' > test/greet.test.sh && echo 'exit 0' > test/extra.sh" } },
          ],
        },
        { text: 'All tests pass now.' },
      ],
      { protect: ['test/**'] },
    ),
  ]);
}, 180_000);

afterAll(async () => {
  await e2e?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('spec.verify', () => {
  it('passes: the run succeeds with the verification in status, an Event and a transcript entry', async () => {
    const status = await finished('passes');
    expect(status, status.message).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    expect(status.result?.verification).toMatchObject({ passed: true, exitCode: 0, attempts: 1 });
    expect(status.result?.verification?.outputTail).toContain('ok: Hello, world');
    expect(status.message).toContain('Verification passed: `sh test/greet.test.sh` exited 0');
    expect(await eventReasons('passes')).toContainEqual(expect.objectContaining({ reason: 'VerificationPassed' }));
    const verifications = (await transcript('passes')).filter((entry) => entry.kind === 'verify');
    expect(verifications.map((entry) => entry.verification?.verdict)).toEqual(['passed']);
  }, 180_000);

  it('fails with required: Failed/VerificationFailed, the diff kept, the output and what to change in status', async () => {
    const status = await finished('fails-required');
    expect(status, status.message).toMatchObject({ phase: 'Failed', reason: 'VerificationFailed' });
    expect(status.result?.diff).toContain('+Hello, world');
    expect(status.result?.verification).toMatchObject({ passed: false, exitCode: 1, attempts: 1 });
    expect(status.result?.verification?.outputTail).toContain("FAIL: expected 'Hello, world', got 'Helo, world'");
    expect(status.message).toContain('`sh test/greet.test.sh` exited 1 on attempt 1 of 1');
    expect(status.message).toContain('spec.verify.retries');
    expect(await eventReasons('fails-required')).toContainEqual(expect.objectContaining({ reason: 'VerificationFailed' }));
  }, 180_000);

  it('fails with required: false: the run succeeds, records passed: false and says so', async () => {
    const status = await finished('fails-optional');
    expect(status, status.message).toMatchObject({ phase: 'Succeeded', reason: 'Completed' });
    expect(status.result?.verification).toMatchObject({ passed: false, exitCode: 1, attempts: 1 });
    expect(status.message).toContain('Verification failed but is not required');
  }, 180_000);

  it('retries: the failing output goes back to the model, which fixes it on the second try, and the run succeeds', async () => {
    const status = await finished('retry-fixes');
    expect(status, status.message).toMatchObject({ phase: 'Succeeded', steps: 3 });
    expect(status.result?.verification).toMatchObject({ passed: true, attempts: 2 });
    expect(status.result?.diff).toContain('+echo "Hello, $1"');
    const entries = await transcript('retry-fixes');
    const verifications = entries.filter((entry) => entry.kind === 'verify');
    expect(verifications.map((entry) => [entry.step, entry.verification?.attempt, entry.verification?.verdict])).toEqual([
      [1, 1, 'retry'],
      [3, 2, 'passed'],
    ]);
    expect(verifications[0]!.verification!.output.text).toContain('FAIL: expected');
  }, 180_000);

  it('retries run out: Failed/VerificationFailed after the last try, saying the model had its retries', async () => {
    const status = await finished('retries-run-out');
    expect(status, status.message).toMatchObject({ phase: 'Failed', reason: 'VerificationFailed', steps: 2 });
    expect(status.result?.verification).toMatchObject({ passed: false, attempts: 2 });
    expect(status.message).toContain('The model had 1 retry and did not fix it');
  }, 180_000);

  it('protect: a file-tool edit of the test is a tool error, and a bash edit of it does not change the grade', async () => {
    const status = await finished('protected');
    // The cheat (the test replaced by `echo ok`, a helper added) would pass; the test as cloned fails.
    expect(status, status.message).toMatchObject({ phase: 'Failed', reason: 'VerificationFailed' });
    expect(status.result?.verification?.outputTail).toContain("FAIL: expected 'Hello, world', got 'Helo, world'");
    const entries = await transcript('protected');
    const refused = entries.find((entry) => entry.kind === 'step' && entry.step === 1)!.calls![0]!;
    expect(refused).toMatchObject({ tool: 'write_file', result: { ok: false } });
    expect(refused.result!.output.text).toContain('PROTECTED_PATH');
    // The diff is of the workspace as graded: the protected test back as it was, the added file gone.
    expect(status.result?.diff).not.toContain('test/greet.test.sh');
    expect(status.result?.diff).not.toContain('test/extra.sh');
  }, 180_000);
});
