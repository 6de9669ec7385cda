// Every sandbox request of the prepare job carries a client deadline derived from the
// configuration: a toolbox that stopped answering (SIGSTOPped, its connection silently gone)
// fails the import, the check or the setup within the configured time, not after the sandbox's
// 31-minute default, on each of the job's tries. The clone is real git; the sandbox a recorder.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CallOptions, ImportOptions, ToolRequest, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { IMPORT_CHECK, importTimeoutMs, runPrepareJob } from '../../operator/src/workers/prepare-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { gitRepository, prepareJobHarness } from '../support/prepare-job-harness.ts';
import { launchHere } from '../../operator/src/workers/process-launcher.ts';

const scratch = mkdtempSync(join(tmpdir(), 'prepare-deadlines-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the prepare job', () => {
  it('bounds the import, the check, the guidance and the setup by the configuration', async () => {
    const { deps, run } = prepareJobHarness(`file://${gitRepository(mkdtempSync(join(scratch, 'r-')))}`, [`file://${scratch}/**`]);
    run.spec.sandbox = { setup: 'npm ci' };
    run.spec.repositoryInstructions = true;
    deps.setupTimeoutMs = 120_000;
    const asked: Array<[string, number | undefined]> = [];
    deps.sandboxes.for = () => ({
      open: async () => undefined,
      close: async () => undefined,
      importTree: async (tar: AsyncIterable<Uint8Array> | NodeJS.ReadableStream, options?: ImportOptions) => {
        asked.push(['import', options?.timeoutMs]);
        for await (const chunk of tar as AsyncIterable<Uint8Array>) void chunk;
      },
      call: async (request: ToolRequest, options?: CallOptions): Promise<ToolResponse> => {
        if (request.tool === 'read_repository_instructions') {
          asked.push([request.tool, options?.timeoutMs]);
          return { ok: true, result: { sources: [], complete: true, diagnostics: [] } } as unknown as ToolResponse;
        }
        asked.push([(request.input as { command: string }).command, options?.timeoutMs]);
        return { ok: true, result: { exitCode: 0, stdout: '', stderr: '', timedOut: false } } as ToolResponse;
      },
    });
    deps.states = { load: async () => undefined, create: async (_state: RunState) => true } as unknown as typeof deps.states;
    deps.queue = { step: async () => undefined } as unknown as typeof deps.queue;
    await runPrepareJob(deps, { uid: 'uid-1', namespace: 'ns', name: 'r' }, 'pod-1');
    expect(asked).toEqual([
      ['import', importTimeoutMs(deps.clonePolicy.maxCheckoutBytes)],
      [(IMPORT_CHECK.input as { command: string }).command, 120_000],
      // The toolbox bounds what it reads of guidance files; a minute for that and one to answer.
      ['read_repository_instructions', 120_000],
      // The setup's own timeout, and a minute for the toolbox to answer after it.
      ['npm ci', 180_000],
    ]);
    // Room for every bound of the clone, then the checkout and its download at 2 MiB/s: a slow
    // link is never cut; a small repository's import is bounded in minutes, not the 31 of the default.
    expect(importTimeoutMs(1024 ** 3)).toBeGreaterThanOrEqual(60_000 + 3 * 300_000 + ((2 * 1024 ** 3) / (2 * 1_048_576)) * 1000);
    expect(importTimeoutMs(64 * 1_048_576)).toBeLessThan(25 * 60_000);
  });

  it('clones with git held to the configured maxGitMemoryBytes', async () => {
    const { deps, run } = prepareJobHarness(`file://${gitRepository(mkdtempSync(join(scratch, 'r-')))}`, [`file://${scratch}/**`]);
    run.spec.repositoryInstructions = false;
    deps.clonePolicy = { ...deps.clonePolicy, maxGitMemoryBytes: 48 * 1_048_576 };
    const launched: string[][] = [];
    deps.launch = (command, args, options) => (launched.push([command, ...args]), launchHere(command, args, options));
    deps.sandboxes.for = () => ({
      open: async () => undefined,
      close: async () => undefined,
      importTree: async (tar: AsyncIterable<Uint8Array> | NodeJS.ReadableStream) => {
        for await (const chunk of tar as AsyncIterable<Uint8Array>) void chunk;
      },
      call: async (): Promise<ToolResponse> =>
        ({ ok: true, result: { exitCode: 0, stdout: '', stderr: '', timedOut: false } }) as ToolResponse,
    });
    deps.states = { load: async () => undefined, create: async (_state: RunState) => true } as unknown as typeof deps.states;
    deps.queue = { step: async () => undefined } as unknown as typeof deps.queue;
    await runPrepareJob(deps, { uid: 'uid-1', namespace: 'ns', name: 'r' }, 'pod-1');
    // Every git runs under `ulimit -d` of 48 MiB (in KiB), the configured figure: the clone's,
    // and the rev-parse after it, which reads the commit whole.
    const gits = launched.filter((line) => line.includes('git'));
    expect(gits.some((line) => line.includes('rev-parse'))).toBe(true);
    for (const line of gits) expect([line[0], ...line.slice(3, 5)]).toEqual(['/bin/sh', 'chamvi-limits', String(48 * 1024)]);
    expect(launched.filter((line) => line[0] === 'git')).toEqual([]);
  });
});
