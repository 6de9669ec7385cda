// Putting spec.verify.protect back before the check (workers/restore-protected.ts) is bounded:
// a process the model left can stop the toolbox before it reads the import, and the import
// then waited the default call timeout (31 minutes) in a worker slot every namespace shares,
// again on each of ten retries. It now has the time the verification gives it, and a sandbox
// that does not answer fails the check closed at once. The clone is real git; the sandbox is
// a recorder.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import type { ImportOptions, Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { restoreProtected } from '../../operator/src/workers/restore-protected.ts';
import { gitRepository } from '../support/prepare-job-harness.ts';

const scratch = mkdtempSync(join(tmpdir(), 'restore-timeout-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('restoring the protected paths', () => {
  it('gives the import the time it is given, and fails the check closed when the sandbox does not answer', async () => {
    const repo = gitRepository(scratch);
    const revision = execFileSync('git', ['-C', repo, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    const run = {
      metadata: { name: 'r', namespace: 'ns', uid: 'uid-1' },
      spec: { repository: { url: `file://${repo}` }, verify: { protect: ['tests/**'] } },
    } as unknown as ParsedCodingRun;
    const deps = {
      clonePolicy: { allowRepo: [`file://${scratch}/**`], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 1_000 },
      resources: { secretValue: async () => 'unused' },
    } as unknown as Parameters<typeof restoreProtected>[0];
    const asked: ImportOptions[] = [];
    const stopped = {
      importTree: async (tar: AsyncIterable<Uint8Array>, options: ImportOptions = {}) => {
        asked.push(options);
        for await (const _chunk of tar); // the toolbox never answers: the deadline does
        throw new SandboxError('TIMEOUT', `no answer within ${options.timeoutMs} ms`);
      },
    } as unknown as Sandbox;
    const failure = await restoreProtected(deps, run, revision, stopped, 45_000).catch((error: unknown) => error);
    expect(asked).toEqual([expect.objectContaining({ prune: ['tests/**'], timeoutMs: 45_000 })]);
    expect(RunFailure.isInstance(failure) && failure.reason).toBe('VerificationFailed');
    expect((failure as Error).message).toMatch(/could not be put back within 45 s: the sandbox did not answer.*nothing was graded/);
  });
});
