// status.timings on the whole product (operator process, real Redis, kwok pods running the
// real toolbox, real git, the scripted model): every phase a run went through is there, in
// the order the run went through them, each starting no earlier than the one before ended,
// all inside the run's life; and /metrics counts the same phases.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunTiming } from '../../operator/src/api/index.ts';
import { kubectl } from '../support/cluster.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, finishedRun } from '../support/namespaced-runs.ts';
import type { OperatorProcess } from '../support/operator-process.ts';
import type { SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { startE2eOperator } from '../support/e2e-operator.ts';

const NS = 'e2e-timings';

interface RunStatus {
  phase?: string;
  steps?: number;
  startTime?: string;
  completionTime?: string;
  timings?: RunTiming[];
}

let root: string;
let repoUrl: string;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;

const EDIT = { toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } };

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-timings-'));
  repoUrl = createBareRepository(root, { 'README.md': 'Hello\n' });
  ({ operator, registrar } = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-timings',
    redisPrefix: `timings${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
  }));
}, 120_000);

afterAll(async () => {
  await operator?.kill();
  await registrar?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

/** The phase-duration histogram's _count per phase, from the operator's /metrics. */
async function phaseCounts(): Promise<Record<string, number>> {
  const port = (await operator.waitForLog('operator starting')).port as number;
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^chamvi_run_phase_duration_seconds_count\{phase="(\w+)"\} (\d+)$/gm))
    counts[match[1]!] = Number(match[2]);
  return counts;
}

describe('status.timings', () => {
  it('holds every phase of a finished run, in run order, each starting after the one before ended, inside the run', async () => {
    const before = await phaseCounts();
    await applyIn(NS, [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'edit-then-done' },
        data: { 'script.json': JSON.stringify({ turns: [{ toolCalls: [EDIT] }, { text: 'Done.' }] }) },
      },
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name: 'timed' },
        spec: {
          task: 'Greet the world.',
          repository: { url: repoUrl },
          model: { provider: 'scripted', scriptRef: { name: 'edit-then-done' } },
          sandbox: { setup: 'true' },
        },
      },
    ]);
    const status = await finishedRun<RunStatus>(NS, 'timed', 90_000).catch(async (error: unknown) => {
      // What the run and the operator said, to tell a stuck run from a slow one.
      const yaml = (await kubectl(['get', 'crun', 'timed', '-n', NS, '-o', 'yaml'])).stdout;
      const said = operator.lines.filter((line) => (line.level ?? 40) >= 40).slice(-10);
      throw new Error(`${String(error)}\n${yaml}\n${JSON.stringify(said, null, 1)}`);
    });
    expect(status.phase).toBe('Succeeded');
    const timings = status.timings ?? [];
    expect(timings.map((entry) => entry.phase)).toEqual([
      'Queued',
      'PodScheduled',
      'PodReady',
      'Clone',
      'Import',
      'Setup',
      'FirstModelCall',
      'FirstToolCall',
      'Finalize',
    ]);
    const created = Date.parse((await kubectl(['get', 'crun', 'timed', '-n', NS, '-o', 'jsonpath={.metadata.creationTimestamp}'])).stdout);
    const completed = Date.parse(status.completionTime!);
    // Queued starts at creationTimestamp (whole seconds), the others at millisecond times
    // measured by one machine's clock here: each starts no earlier than the one before ended.
    expect(timings[0]!.start).toBe(new Date(created).toISOString());
    expect(Date.parse(timings[0]!.start) + timings[0]!.durationMs).toBe(Date.parse(status.startTime!));
    let previousEnd = created;
    for (const entry of timings) {
      const start = Date.parse(entry.start);
      expect(start, `${entry.phase} starts before the previous phase ended`).toBeGreaterThanOrEqual(previousEnd - 1);
      expect(entry.durationMs).toBeGreaterThanOrEqual(0);
      previousEnd = start + entry.durationMs;
    }
    expect(previousEnd, 'Finalize ends with the terminal write').toBeLessThanOrEqual(completed + 1);
    // The sandbox phases meet end to start: created → admitted → bound → Ready.
    for (let index = 1; index < 3; index++) {
      expect(Date.parse(timings[index]!.start)).toBe(Date.parse(timings[index - 1]!.start) + timings[index - 1]!.durationMs);
    }
    // Each written phase is observed once in chamvi_run_phase_duration_seconds.
    const after = await phaseCounts();
    for (const entry of timings) expect((after[entry.phase] ?? 0) - (before[entry.phase] ?? 0), entry.phase).toBe(1);
  }, 120_000);
});
