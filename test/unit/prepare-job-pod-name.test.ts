// A run given a warm pool pod is handed to the agent in the reconcile that claims the pod, and
// its prepare job can start before that reconcile's status write names the pod. The job's
// data names it (signed like the rest), so the job opens the sandbox on it at once; a job
// queued by an older operator, which does not name it, still waits for the status.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runAgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { gitRepository, prepareJobHarness } from '../support/prepare-job-harness.ts';

const scratch = mkdtempSync(join(tmpdir(), 'prepare-pod-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

// The run as the job first reads it: admitted, its claim's status write not landed yet.
const beforeTheClaimWrite = { status: { phase: 'Provisioning' as const, startTime: '2026-11-30T00:00:00Z' } };

const prepare = (podName?: string) => ({
  name: 'prepare' as const,
  data: { uid: 'uid-1', namespace: 'ns', name: 'r', ...(podName ? { podName } : {}) },
  attempt: 1,
  attempts: 10,
});

describe('the prepare job opens the sandbox on the pod its job names', () => {
  it('at once, reading the run no more, when the status does not name the pod yet', async () => {
    const url = `file://${gitRepository(scratch)}`;
    const { deps, seen } = prepareJobHarness(url, [`file://${scratch}/*`], beforeTheClaimWrite);
    await expect(runAgentJob(deps, prepare('default-warm-x1'))).rejects.toThrow('no sandbox in this test');
    expect(seen.sandboxPods).toEqual(['default-warm-x1']);
    expect(seen.freshReads).toBe(0);
  });

  it('a job that names no pod (an older operator queued it) reads the run until its status does', async () => {
    const url = `file://${gitRepository(scratch)}`;
    const { deps, seen, run } = prepareJobHarness(url, [`file://${scratch}/*`], beforeTheClaimWrite);
    let reads = 0;
    deps.getRunFresh = async () => {
      reads += 1;
      return reads < 2 ? run : { ...run, status: { ...run.status, phase: 'Running', podName: 'default-warm-x1' } };
    };
    await expect(runAgentJob(deps, prepare())).rejects.toThrow('no sandbox in this test');
    expect(seen.sandboxPods).toEqual(['default-warm-x1']);
    expect(reads).toBe(2);
  });
});
