// spec.sandbox.setup runs once. A prepare that fails is retried from the clone, so whatever
// can fail after the setup would run it a second time (a `git apply` in it then fails the run,
// a 30-minute `npm ci` doubles). Here the retried step fails in each place it could before:
// the guidance read (a broken exec session) and the read of the run for the SetupDone Event.
// The clone is real git; the sandbox is a recorder that answers like the toolbox.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ToolRequest, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { runPrepareJob } from '../../operator/src/workers/prepare-job.ts';
import { gitRepository, prepareJobHarness } from '../support/prepare-job-harness.ts';

const scratch = mkdtempSync(join(tmpdir(), 'prepare-setup-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ref = { uid: 'uid-1', namespace: 'ns', name: 'r' };
const SETUP = 'npm ci';

/** The harness's run with a setup and guidance, a sandbox that fails `failing` once, and what the job did. */
function setupHarness(failing: 'guidance' | 'run-read') {
  const { deps, run } = prepareJobHarness(`file://${gitRepository(mkdtempSync(join(scratch, 'r-')))}`, [`file://${scratch}/**`]);
  run.spec.sandbox = { setup: SETUP };
  run.spec.repositoryInstructions = true;
  const seen = { setups: 0, states: [] as RunState[], steps: [] as number[] };
  let failed = false;
  const failOnce = (where: typeof failing) => {
    if (failing !== where || failed) return;
    failed = true;
    throw new Error(`${where} failed once in this test`);
  };
  deps.sandboxes.for = () => ({
    open: async () => undefined,
    close: async () => undefined,
    importTree: async (tar: AsyncIterable<Uint8Array> | NodeJS.ReadableStream) => {
      for await (const chunk of tar as AsyncIterable<Uint8Array>) void chunk;
    },
    call: async (request: ToolRequest): Promise<ToolResponse> => {
      const command = (request.input as { command?: string }).command;
      if (request.tool === 'read_repository_instructions') {
        failOnce('guidance');
        return { ok: true, result: { sources: [], diagnostics: [] } } as ToolResponse;
      }
      if (command === SETUP) seen.setups += 1;
      return { ok: true, result: { exitCode: 0, stdout: '', stderr: '', timedOut: false } } as ToolResponse;
    },
  });
  let reads = 0;
  deps.getRun = async () => {
    reads += 1;
    // The first read is the job's own (liveRun); any later one comes after the setup.
    if (reads > 1) failOnce('run-read');
    return run;
  };
  deps.states = {
    load: async () => seen.states.at(-1),
    create: async (state: RunState) => (seen.states.push(state), true),
  } as unknown as typeof deps.states;
  deps.queue = { step: async (_ref: unknown, step: number) => void seen.steps.push(step) } as unknown as typeof deps.queue;
  return { deps, seen };
}

/** The job as BullMQ runs it: again after a failure, until it succeeds. */
async function withRetry(run: () => Promise<void>): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      await run();
      return attempt;
    } catch (error) {
      if (attempt >= 3) throw error;
    }
  }
}

describe('the prepare job runs spec.sandbox.setup once', () => {
  it('when the guidance read fails: it is read before the setup, so the retry runs the setup for the first time', async () => {
    const { deps, seen } = setupHarness('guidance');
    expect(await withRetry(() => runPrepareJob(deps, ref, 'pod-1'))).toBe(2);
    expect(seen.setups).toBe(1);
    expect(seen.states).toHaveLength(1);
    expect(seen.states[0]!.timings?.map((t) => t.phase)).toEqual(['Clone', 'Import', 'Setup']);
    expect(seen.steps).toEqual([0]);
  });

  it('when a read of the run would fail after the setup: the SetupDone Event needs none', async () => {
    const { deps, seen } = setupHarness('run-read');
    expect(await withRetry(() => runPrepareJob(deps, ref, 'pod-1'))).toBe(1);
    expect(seen.setups).toBe(1);
    expect(seen.steps).toEqual([0]);
  });
});
