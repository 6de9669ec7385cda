// Security #11.2: the prepare job checks the run's repository against allowRepo as it is right
// before the clone, the operator's and the namespace's chamvi.dev/allow-repo (a run accepted
// earlier, or state that reached the worker some other way, is not trusted), and fails the run
// RepoNotAllowed before any Secret is read or any git is run. The dependencies are in-memory
// recorders: what is tested is the job's decision.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readNamespacePolicy } from '../../operator/src/reconcile/namespace-policy.ts';
import { runAgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { gitRepository, prepareJobHarness as harness } from '../support/prepare-job-harness.ts';

const scratch = mkdtempSync(join(tmpdir(), 'prepare-check-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

// Through the worker's job runner, which maps the job's RunFailure to the run's status.
const prepareJob = { name: 'prepare' as const, data: { uid: 'uid-1', namespace: 'ns', name: 'r' }, attempt: 1, attempts: 10 };

describe('security #11.2 the prepare job re-checks allowRepo right before the clone', () => {
  it('fails a run whose repository the current allowRepo no longer allows, reading no Secret and cloning nothing', async () => {
    const url = `file://${gitRepository(scratch)}`;
    const temp = mkdtempSync(join(tmpdir(), 'prepare-check-temp-'));
    const previous = process.env.TMPDIR;
    process.env.TMPDIR = temp;
    try {
      const { deps, seen } = harness(url, ['https://github.com/acme/*']);
      await runAgentJob(deps, prepareJob);
      expect(seen.statuses).toHaveLength(1);
      expect(seen.statuses[0]).toMatchObject({ phase: 'Failed', reason: 'RepoNotAllowed' });
      expect(seen.statuses[0]!.message).toContain("does not match the operator's allowRepo");
      expect(seen.secretsRead).toBe(0);
      expect(readdirSync(temp)).toEqual([]);
    } finally {
      if (previous === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previous;
      rmSync(temp, { recursive: true, force: true });
    }
  });

  it("fails a run whose namespace's chamvi.dev/allow-repo was narrowed after admission, reading no Secret and cloning nothing", async () => {
    const url = `file://${gitRepository(scratch)}`;
    const temp = mkdtempSync(join(tmpdir(), 'prepare-check-temp-'));
    const previous = process.env.TMPDIR;
    process.env.TMPDIR = temp;
    try {
      const { deps, seen } = harness(url, [`file://${scratch}/*`]);
      const narrowed = { policyOf: async () => readNamespacePolicy({ 'chamvi.dev/allow-repo': 'https://github.com/acme/*' }) };
      await runAgentJob({ ...deps, namespacePolicies: narrowed }, prepareJob);
      expect(seen.statuses).toHaveLength(1);
      expect(seen.statuses[0]).toMatchObject({ phase: 'Failed', reason: 'RepoNotAllowed' });
      expect(seen.statuses[0]!.message).toMatch(/^namespace ns is narrowed by its chamvi\.dev\/allow-repo annotation/);
      expect(seen.secretsRead).toBe(0);
      expect(readdirSync(temp)).toEqual([]);
    } finally {
      if (previous === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previous;
      rmSync(temp, { recursive: true, force: true });
    }
  });

  it('fails a run whose URL is not canonical even if an old allowRepo once let it through', async () => {
    const { deps, seen } = harness('https://github.com\\acme\\x@evil.example', ['https://github.com/acme/*']);
    await runAgentJob(deps, prepareJob);
    expect(seen.statuses[0]).toMatchObject({ phase: 'Failed', reason: 'RepoNotAllowed' });
    expect(seen.statuses[0]!.message).toContain('backslash');
    expect(seen.secretsRead).toBe(0);
  });

  it("clones an allowed repository, the namespace's list allowing it too (the control: the check lets it through to the clone)", async () => {
    const url = `file://${gitRepository(scratch)}`;
    const { deps, seen } = harness(url, [`file://${scratch}/*`]);
    const namespacePolicies = { policyOf: async () => readNamespacePolicy({ 'chamvi.dev/allow-repo': `file://${scratch}/**` }) };
    // The clone succeeds; the job then asks for the sandbox, which this test does not have.
    await expect(runAgentJob({ ...deps, namespacePolicies }, prepareJob)).rejects.toThrow('no sandbox in this test');
    expect(seen.statuses).toEqual([]);
    expect(seen.secretsRead).toBe(1);
    expect(seen.sandboxes).toBe(1);
  });
});
