// Promises the README makes about how a run ends and what it tells on the way, each shown on
// the whole product (operator process, real Redis, kwok pods running the real toolbox, real
// git, the scripted model): DeadlineExceeded keeps the partial diff, a setup that outlives
// its timeout ends SetupFailed, `kubectl describe` shows the Events of the run's life and
// `kubectl codingrun logs` each step, and an exec that breaks mid-call counts in chamvi_exec_errors_total.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diffConfigMapName } from '../../operator/src/reconcile/names.ts';
import { kubectl } from '../support/cluster.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, finishedRun, runStatus } from '../support/namespaced-runs.ts';
import { type OperatorProcess, eventually } from '../support/operator-process.ts';
import type { SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { startE2eOperator } from '../support/e2e-operator.ts';
import { runPlugin } from '../support/plugin.ts';
import type { TranscriptEntry } from '../../operator/src/record/transcript-entry.ts';

const NS = 'e2e-outcomes';
/** The operator's setupTimeoutSeconds here: short, so a setup that sleeps outlives it. */
const SETUP_TIMEOUT_SECONDS = 3;

interface RunStatus {
  phase?: string;
  reason?: string;
  message?: string;
  steps?: number;
  result?: { diff: string; diffConfigMap?: string; filesChanged: number };
}

let root: string;
let repoUrl: string;
let registrar: SandboxExecRegistrar;
let operator: OperatorProcess;

const apply = (...objects: object[]) => applyIn(NS, objects);
const statusOf = (name: string) => runStatus<RunStatus>(NS, name);
const finished = (name: string, timeoutMs = 90_000) => finishedRun<RunStatus>(NS, name, timeoutMs);

const script = (name: string, turns: object[]) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data: { 'script.json': JSON.stringify({ turns }) },
});
const scripted = (scriptName: string) => ({ provider: 'scripted', scriptRef: { name: scriptName } });
function codingRun(name: string, scriptName: string, spec: object = {}) {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name },
    spec: { task: 'Make the README greet the whole world.', repository: { url: repoUrl }, model: scripted(scriptName), ...spec },
  };
}

/** The run's Events as `kubectl describe` shows them, oldest first. */
async function eventsOf(name: string): Promise<Array<{ type: string; reason: string; message: string }>> {
  const uid = (await kubectl(['get', 'crun', name, '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
  const listed = await kubectl(['get', 'events', '-n', NS, '--field-selector', `involvedObject.uid=${uid}`, '-o', 'json']);
  const items = (
    JSON.parse(listed.stdout) as {
      items: Array<{ type: string; reason: string; message: string; metadata: { name: string }; lastTimestamp?: string }>;
    }
  ).items;
  return items
    .sort((a, b) => (a.lastTimestamp ?? '').localeCompare(b.lastTimestamp ?? '') || a.metadata.name.localeCompare(b.metadata.name))
    .map(({ type, reason, message }) => ({ type, reason, message }));
}

async function metric(pattern: RegExp): Promise<number> {
  const port = (await operator.waitForLog('operator starting')).port as number;
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => pattern.test(line))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

const EDIT = { toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, world' } };

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-outcomes-'));
  repoUrl = createBareRepository(root, { 'README.md': 'Hello\n\nA small example repository.\n' });
  ({ operator, registrar } = await startE2eOperator({
    namespace: NS,
    root,
    identity: 'e2e-outcomes',
    redisPrefix: `outcomes${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
    env: { CHAMVI_SETUP_TIMEOUT_SECONDS: String(SETUP_TIMEOUT_SECONDS) },
  }));
}, 120_000);

afterAll(async () => {
  await operator?.kill();
  await registrar?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('how a run ends', () => {
  it('ends DeadlineExceeded when budget.timeout passes mid-work, and keeps the changes made so far as its diff', async () => {
    // Step 1 edits; step 2's bash outlives the timeout; step 3 (which would succeed) is never asked for.
    await apply(
      script('deadline-script', [
        { toolCalls: [EDIT] },
        { toolCalls: [{ toolName: 'bash', input: { command: 'sleep 20' } }] },
        { text: 'never reached' },
      ]),
      codingRun('deadline', 'deadline-script', { budget: { timeout: '12s' } }),
    );
    const status = await finished('deadline');
    expect(status, status.message).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded', steps: 2 });
    expect(status.message).toContain('partial diff is kept');
    expect(status.result?.diff).toContain('-Hello\n+Hello, world\n');
    const uid = (await kubectl(['get', 'crun', 'deadline', '-n', NS, '-o', 'jsonpath={.metadata.uid}'])).stdout;
    expect(status.result?.diffConfigMap).toBe(diffConfigMapName({ metadata: { name: 'deadline', uid } }));
    const kept = await kubectl(['get', 'configmap', status.result!.diffConfigMap!, '-n', NS, '-o', 'jsonpath={.data.diff}']);
    expect(kept.stdout).toContain('+Hello, world');
  }, 120_000);

  it('ends SetupFailed ("timed out", with the output so far) when spec.sandbox.setup outlives setupTimeoutSeconds', async () => {
    await apply(
      script('never-asked', [{ text: 'done' }]),
      codingRun('setup-hangs', 'never-asked', { sandbox: { setup: 'echo "installing dependencies"; sleep 60; echo "never printed"' } }),
    );
    const started = Date.now();
    const status = await finished('setup-hangs');
    expect(status).toMatchObject({ phase: 'Failed', reason: 'SetupFailed' });
    expect(status.message).toContain('spec.sandbox.setup timed out');
    expect(status.message).toContain('installing dependencies');
    expect(status.message).not.toContain('never printed');
    // Cut at the configured bound, not at the end of the sleep.
    expect(Date.now() - started).toBeLessThan(45_000);
    expect(status.steps ?? 0).toBe(0);
  }, 120_000);
});

describe('the Events and the transcript the README promises (Events for transitions, `kubectl codingrun logs` for steps)', () => {
  it("records the run's life as Events and each step, the approval's answer among them, in its transcript", async () => {
    await apply(
      script('events-script', [
        { toolCalls: [{ toolName: 'read_file', input: { path: 'README.md' } }] },
        { toolCalls: [EDIT] },
        { toolCalls: [{ toolName: 'bash', input: { command: 'git diff --stat' } }] },
        { text: 'Greeted the world.' },
      ]),
      codingRun('events', 'events-script', { approval: { tools: ['bash'] } }),
    );
    const waiting = await eventually(
      async () => {
        const status = (await statusOf('events')) as RunStatus & { pendingApproval?: { id: string; input: string } };
        return status.phase === 'WaitingForApproval' ? status : undefined;
      },
      90_000,
      'events to wait for approval',
    );
    const { createHash } = await import('node:crypto');
    const sha256 = createHash('sha256').update(waiting.pendingApproval!.input, 'utf8').digest('hex');
    await kubectl([
      'annotate',
      'crun',
      'events',
      '-n',
      NS,
      `chamvi.dev/approval=${JSON.stringify({ id: waiting.pendingApproval!.id, decision: 'approve', sha256 })}`,
      '--overwrite',
    ]);
    const status = await finished('events');
    expect(status).toMatchObject({ phase: 'Succeeded', reason: 'Completed', steps: 4 });

    const events = await eventually(
      async () => {
        const all = await eventsOf('events');
        return all.some((event) => event.reason === 'Completed') ? all : undefined;
      },
      20_000,
      'the Completed Event',
    );
    expect(events.map((event) => event.reason)).not.toContain('Step');
    const logs = await runPlugin(['logs', 'events', '-n', NS, '-o', 'json']);
    expect(logs.code, logs.stderr).toBe(0);
    const entries = logs.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as TranscriptEntry);
    const kinds = entries.map((entry) => (entry.step === undefined ? entry.kind : `${entry.kind} ${entry.step}`));
    expect(kinds).toEqual(['step 1', 'step 2', 'step 3', 'approval 3', 'step 4', 'outcome']);
    const parked = entries[2]!.calls![0]!;
    expect(parked).toMatchObject({ tool: 'bash', waiting: { approvalId: waiting.pendingApproval!.id, inputSha256: sha256 } });
    expect(entries[3]).toMatchObject({ approval: { id: waiting.pendingApproval!.id, decision: 'approve', sha256 } });
    expect(entries[3]!.calls![0]!.result).toMatchObject({ ok: true });
    const reasons = new Set(events.map((event) => event.reason));
    for (const reason of ['Accepted', 'Provisioning', 'SandboxReady', 'Prepared', 'AwaitingApproval', 'Approved', 'Completed']) {
      expect(reasons, `${reason} in ${[...reasons].join(', ')}`).toContain(reason);
    }
  }, 150_000);

  it('records a Warning Event with the reason of every failed run above', async () => {
    for (const [name, reason] of [
      ['deadline', 'DeadlineExceeded'],
      ['setup-hangs', 'SetupFailed'],
    ] as const) {
      const warnings = (await eventsOf(name)).filter((event) => event.type === 'Warning');
      expect(
        warnings.map((event) => event.reason),
        name,
      ).toContain(reason);
    }
  });
});

describe('exec errors', () => {
  it('counts an exec that breaks mid-call in chamvi_exec_errors_total (and the step is redone)', async () => {
    const before = await metric(/^chamvi_exec_errors_total\{/);
    // The first time it runs, the command kills the toolbox serving it (its parent process):
    // the exec stream ends without an answer. The redone step finds the mark and goes on.
    const killOnce = 'if [ ! -e .git/killed-once ]; then touch .git/killed-once; kill -9 $PPID; fi; echo survived';
    await apply(
      script('exec-error-script', [
        { toolCalls: [{ toolName: 'bash', input: { command: killOnce } }] },
        { toolCalls: [EDIT] },
        { text: 'done' },
      ]),
      codingRun('exec-error', 'exec-error-script'),
    );
    const status = await finished('exec-error');
    expect(status, status.message).toMatchObject({ phase: 'Succeeded', steps: 3 });
    expect(operator.logged('agent job failed').some((line) => line.name === 'exec-error')).toBe(true);
    expect(await metric(/^chamvi_exec_errors_total\{/)).toBeGreaterThan(before);
  }, 150_000);
});
