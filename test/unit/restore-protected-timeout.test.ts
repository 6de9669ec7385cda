// Putting spec.verify.protect back before the check (workers/restore-protected.ts) is bounded:
// a process the model left can stop the toolbox before it reads the import, and the import
// then waited the default call timeout (31 minutes) in a worker slot every namespace shares,
// again on each of ten retries. It now has the time the verification gives it, and a sandbox
// that does not answer fails the check closed at once. The clone is real git; the sandbox is
// a recorder. Fails closed only when the silence is the sandbox's code: an import the sandbox
// does not answer is judged as the check is (sandbox-lost-check.ts), so a sandbox pod that is
// gone or NotReady (a lost node) is a lost sandbox, retried into SandboxLost, and an import
// never sent did not run; neither is VerificationFailed.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { V1Pod } from '@kubernetes/client-node';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import type { ImportOptions, Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { restoreProtected } from '../../operator/src/workers/restore-protected.ts';
import { sandboxLostCheck, type SandboxLostCheck } from '../../operator/src/workers/sandbox-lost-check.ts';
import { gitRepository } from '../support/prepare-job-harness.ts';
import { standingSandboxPod } from '../support/standing-sandbox-pod.ts';

const scratch = mkdtempSync(join(tmpdir(), 'restore-timeout-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Restores into a sandbox whose import never answers; `sandboxLost` absent: local mode. */
async function restoreUnanswered(options: { sandboxLost?: SandboxLostCheck; neverSent?: boolean } = {}) {
  const repo = gitRepository(scratch);
  const revision = execFileSync('git', ['-C', repo, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
  const run = {
    metadata: { name: 'r', namespace: 'ns', uid: 'uid-1' },
    spec: { repository: { url: `file://${repo}` }, verify: { protect: ['tests/**'] } },
  } as unknown as ParsedCodingRun;
  const warnings: object[] = [];
  const deps = {
    clonePolicy: { allowRepo: [`file://${scratch}/**`], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 1_000 },
    resources: { secretValue: async () => 'unused' },
    logger: { info: () => {}, warn: (fields: object) => void warnings.push(fields), error: () => {} },
    ...(options.sandboxLost ? { sandboxLost: options.sandboxLost } : {}),
  } as unknown as Parameters<typeof restoreProtected>[0];
  const asked: ImportOptions[] = [];
  const stopped = {
    importTree: async (tar: AsyncIterable<Uint8Array>, importOptions: ImportOptions = {}) => {
      asked.push(importOptions);
      for await (const _chunk of tar); // the toolbox never answers: the deadline does
      throw new SandboxError('TIMEOUT', `no answer within ${importOptions.timeoutMs} ms`, {
        ...(options.neverSent ? { written: false as const } : {}),
      });
    },
  } as unknown as Sandbox;
  const failure = await restoreProtected(deps, run, revision, stopped, 45_000).catch((error: unknown) => error);
  return { failure, asked, warnings };
}

/** The pod read the operator makes (sandbox-lost-check.ts), over a pod at the name as given, and the reads counted. */
function podRead(pod: V1Pod | undefined) {
  const reads: string[] = [];
  const check = sandboxLostCheck(async (namespace, name) => {
    reads.push(`${namespace}/${name}`);
    return pod;
  });
  return { check, reads };
}

describe('restoring the protected paths', () => {
  it('gives the import the time it is given, and fails the check closed when the sandbox does not answer', async () => {
    const { failure, asked } = await restoreUnanswered();
    expect(asked).toEqual([expect.objectContaining({ prune: ['tests/**'], timeoutMs: 45_000 })]);
    expect(RunFailure.isInstance(failure) && failure.reason).toBe('VerificationFailed');
    expect((failure as Error).message).toMatch(/could not be put back within 45 s: the sandbox did not answer.*nothing was graded/);
  });

  it('throws the TIMEOUT on, not VerificationFailed, when the sandbox pod is gone, so the finalize is retried into SandboxLost', async () => {
    const { check, reads } = podRead(undefined);
    const { failure, warnings } = await restoreUnanswered({ sandboxLost: check });
    expect(failure).toMatchObject({ name: 'SandboxError', reason: 'TIMEOUT' });
    expect(RunFailure.isInstance(failure)).toBe(false);
    expect(reads).toHaveLength(1);
    expect((failure as Error).message).toMatch(/no answer within 45000 ms; the sandbox is lost: pod ns\/\S+ is gone/);
    expect(warnings).toEqual([expect.objectContaining({ lost: expect.stringContaining('is gone') as string })]);
  });

  it('fails the check closed when the sandbox pod still stands (code in it stopped the toolbox)', async () => {
    const run = { metadata: { name: 'r', namespace: 'ns', uid: 'uid-1' } } as unknown as ParsedCodingRun;
    const { check, reads } = podRead(standingSandboxPod(run));
    const { failure } = await restoreUnanswered({ sandboxLost: check });
    expect(reads).toHaveLength(1);
    expect(RunFailure.isInstance(failure) && failure.reason).toBe('VerificationFailed');
  });

  it('throws the TIMEOUT on, without reading the pod, when the import was never sent to the toolbox', async () => {
    const { check, reads } = podRead(undefined);
    const { failure } = await restoreUnanswered({ sandboxLost: check, neverSent: true });
    expect(reads).toEqual([]);
    expect(failure).toMatchObject({ name: 'SandboxError', reason: 'TIMEOUT', written: false });
  });
});
