// Issue #15.4 on the whole product (operator process, real Redis, kwok pods running the real
// toolbox, real git, the scripted model): namespaces take turns for the cluster's sandbox
// slots, a namespace over its tokens per day gets the documented behaviour (new runs queued
// with the reason, a running run stopped at its next step with BudgetExceeded and its diff
// kept), and a namespace without limits of its own is not affected.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, kubectl, kubectlOk } from '../support/cluster.ts';
import { startE2eOperator, type E2eOperator } from '../support/e2e-operator.ts';
import { createBareRepository } from '../support/git-fixture.ts';
import { applyIn, finishedRun, runStatus } from '../support/namespaced-runs.ts';
import { eventually } from '../support/operator-process.ts';

/** Two teams that submit 20 runs each, and a third with a token budget. */
const TEAM_A = 'e2e-fair-a';
const TEAM_B = 'e2e-fair-b';
const BUDGETED = 'e2e-fair-budget';
const SLOTS = 4;
const RUNS_PER_TEAM = 20;

interface RunStatus {
  phase?: string;
  reason?: string;
  message?: string;
  steps?: number;
  queue?: { heldBy: string; position?: number };
  admission?: { sequence: number; time: string };
  result?: { diff: string };
}

let root: string;
let repoUrl: string;
let e2e: E2eOperator | undefined;

const script = (name: string, turns: object[]) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data: { 'script.json': JSON.stringify({ turns }) },
});
const codingRun = (name: string, scriptName: string) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name },
  spec: { task: 'Say done.', repository: { url: repoUrl }, model: { provider: 'scripted', scriptRef: { name: scriptName } } },
});
/** The tiniest run: one step, no tool. */
const DONE = script('done', [{ text: 'done', usage: { inputTokens: 10, outputTokens: 1 } }]);
const names = (prefix: string) => Array.from({ length: RUNS_PER_TEAM }, (_, i) => `${prefix}-${String(i + 1).padStart(2, '0')}`);

/**
 * Polls `check` every `intervalMs` until it returns a value; unlike `eventually` a throw ends
 * it at once (admissions out of turn never come back into turn), and it spawns kubectl at a
 * pace the shared machine bears.
 */
async function poll<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string, intervalMs = 2_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Every run of the two teams, in one kubectl call. */
async function teamRuns(): Promise<Array<{ namespace: string; name: string; status: RunStatus }>> {
  const listed = JSON.parse(await kubectlOk(['get', 'crun', '-A', '-o', 'json'])) as {
    items: Array<{ metadata: { namespace: string; name: string }; status?: RunStatus }>;
  };
  return listed.items
    .filter(({ metadata }) => metadata.namespace === TEAM_A || metadata.namespace === TEAM_B)
    .map(({ metadata, status }) => ({ namespace: metadata.namespace, name: metadata.name, status: status ?? {} }));
}

async function metric(pattern: RegExp): Promise<number | undefined> {
  const port = (await e2e!.operator.waitForLog('operator starting')).port as number;
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((candidate) => pattern.test(candidate));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'chamvi-e2e-fair-'));
  repoUrl = createBareRepository(root, { 'README.md': 'Hello\n' });
  for (const namespace of [TEAM_A, TEAM_B, BUDGETED]) await createNamespace(namespace, { restricted: true });
  await kubectlOk(['annotate', 'namespace', BUDGETED, 'chamvi.dev/tokens-per-day=250']);
  // Every run of both teams exists before the operator starts, team A's all older than team
  // B's: first come first served would admit A's 20 before any of B's.
  await applyIn(TEAM_A, [DONE, ...names('a').map((name) => codingRun(name, 'done'))]);
  await applyIn(TEAM_B, [DONE, ...names('b').map((name) => codingRun(name, 'done'))]);
  e2e = await startE2eOperator({
    namespace: 'e2e-fair',
    root,
    identity: 'e2e-fair',
    redisPrefix: `fair${Date.now()}`,
    allowRepo: `file://${join(root, 'git')}/*`,
    env: { CHAMVI_WATCH_NAMESPACES: [TEAM_A, TEAM_B, BUDGETED].join(','), CHAMVI_MAX_ACTIVE_RUNS: String(SLOTS) },
  });
}, 180_000);

afterAll(async () => {
  // What went wrong, if anything did: the operator's warnings (reconcile failures, refusals).
  // (A watch that times out and restarts is routine, not one of them.)
  const warnings = (e2e?.operator.lines ?? []).filter((line) => Number(line.level) >= 40 && line.msg !== 'watch failed; retrying');
  if (warnings.length > 0)
    console.warn(
      warnings
        .slice(0, 50)
        .map((line) => JSON.stringify(line))
        .join('\n'),
    );
  await e2e?.stop();
  if (root) rmSync(root, { recursive: true, force: true, maxRetries: 5 });
});

describe('fair share between namespaces', () => {
  it(`admits ${RUNS_PER_TEAM} runs each of two namespaces alternately against ${SLOTS} cluster slots, and says where each queued run stands`, async () => {
    // While the slots are taken, a queued run says what holds it and its place.
    const queued = await poll(
      async () => {
        const status = await runStatus<RunStatus>(TEAM_B, 'b-20');
        return status.queue ? status : undefined;
      },
      60_000,
      'b-20 to be queued',
    );
    expect(queued).toMatchObject({ phase: 'Pending', reason: 'Queued', queue: { heldBy: 'ClusterSlots' } });
    expect(queued.queue!.position).toBeGreaterThan(1);
    expect(queued.message).toContain(`all ${SLOTS} slots of the cluster (operator maxActiveRuns) are taken`);

    // One listing every few seconds (not a poller per run): fails as soon as the admissions so
    // far are out of turn, and passes once every run has succeeded.
    const order = await poll(
      async () => {
        const runs = await teamRuns();
        const admitted = runs
          .filter(({ status }) => status.admission)
          .sort((x, y) => x.status.admission!.sequence - y.status.admission!.sequence);
        // Judged on the gap-free prefix 1..n: a run granted #7 may show it after the run granted
        // #8 does (each writes its own status), which is not an admission out of turn.
        const prefix = admitted.filter(({ status }, index) => status.admission!.sequence === index + 1);
        const turns = prefix.map(({ namespace }) => (namespace === TEAM_A ? 'a' : 'b')).join('');
        if (turns !== 'ab'.repeat(RUNS_PER_TEAM).slice(0, turns.length))
          throw new Error(`admitted out of turn: ${admitted.map(({ name, status }) => `${name}#${status.admission!.sequence}`).join(' ')}`);
        for (const { name, status } of runs) expect(status.phase, `${name}: ${status.message}`).not.toBe('Failed');
        return runs.length === 2 * RUNS_PER_TEAM && runs.every(({ status }) => status.phase === 'Succeeded') ? admitted : undefined;
      },
      900_000,
      'every run to succeed',
    );
    // Sequences 1..40 without a gap: a skipped number is a slot granted and then lost (the
    // granted run's own reconcile, still deciding from before the grant, wrote it off).
    expect(order.map(({ status }) => status.admission!.sequence)).toEqual(Array.from({ length: 2 * RUNS_PER_TEAM }, (_, i) => i + 1));
    // a, b, a, b, ...: each team's runs oldest first.
    expect(order.map(({ namespace }) => (namespace === TEAM_A ? 'a' : 'b')).join('')).toBe('ab'.repeat(RUNS_PER_TEAM));
    expect(order.filter(({ namespace }) => namespace === TEAM_A).map(({ name }) => name)).toEqual(names('a'));
    expect(order.filter(({ namespace }) => namespace === TEAM_B).map(({ name }) => name)).toEqual(names('b'));
    const queuedEvents = await kubectl(['get', 'events', '-n', TEAM_B, '--field-selector', 'reason=Queued', '-o', 'name']);
    expect(queuedEvents.stdout.trim()).not.toBe('');
  }, 960_000);
});

describe("a namespace's tokens per day", () => {
  it('stops its running run at the next step with BudgetExceeded and the diff kept, queues its new runs with the reason, and leaves another namespace alone', async () => {
    // Whatever the test above left queued gives its slots back first.
    for (const namespace of [TEAM_A, TEAM_B]) await kubectlOk(['delete', 'crun', '--all', '-n', namespace, '--wait=false']);
    // 100 tokens a step against a budget of 250: after step 3 the namespace has spent 300,
    // and step 4 stops before it calls the model.
    const usage = { inputTokens: 90, outputTokens: 10 };
    const echo = { toolCalls: [{ toolName: 'bash', input: { command: 'echo working' } }], usage };
    await applyIn(BUDGETED, [
      script('spender', [
        { toolCalls: [{ toolName: 'edit_file', input: { path: 'README.md', oldString: 'Hello', newString: 'Hello, budget' } }], usage },
        echo,
        echo,
        echo,
        { text: 'never reached', usage },
      ]),
      codingRun('spender', 'spender'),
    ]);
    const stopped = await finishedRun<RunStatus>(BUDGETED, 'spender', 90_000);
    expect(stopped, stopped.message).toMatchObject({ phase: 'Failed', reason: 'BudgetExceeded', steps: 3 });
    expect(stopped.message).toContain(`Namespace ${BUDGETED} has used 300 of its 250 tokens`);
    expect(stopped.message).toContain('chamvi.dev/tokens-per-day');
    expect(stopped.result?.diff).toContain('+Hello, budget');
    expect(await metric(new RegExp(`^chamvi_namespace_tokens_today\\{namespace="${BUDGETED}"\\}`))).toBe(300);

    // A new run of the namespace waits, saying why; one of another namespace runs meanwhile.
    await applyIn(BUDGETED, [DONE, codingRun('after-budget', 'done')]);
    await applyIn(TEAM_A, [codingRun('unaffected', 'done')]);
    const unaffected = await finishedRun<RunStatus>(TEAM_A, 'unaffected', 90_000);
    expect(unaffected, unaffected.message).toMatchObject({ phase: 'Succeeded' });
    const waiting = await eventually(
      async () => {
        const status = await runStatus<RunStatus>(BUDGETED, 'after-budget');
        return status.reason === 'Queued' ? status : undefined;
      },
      30_000,
      'after-budget to be queued',
    );
    expect(waiting).toMatchObject({ phase: 'Pending', queue: { heldBy: 'NamespaceTokenBudget' } });
    expect(waiting.message).toContain(`namespace ${BUDGETED} has spent its 250 tokens`);
    expect(waiting.message).toContain('00:00 UTC');
    // Raising the budget lets it go (within the policy cache and the queue's recheck).
    await kubectlOk(['annotate', '--overwrite', 'namespace', BUDGETED, 'chamvi.dev/tokens-per-day=1000']);
    const released = await finishedRun<RunStatus>(BUDGETED, 'after-budget', 90_000);
    expect(released, released.message).toMatchObject({ phase: 'Succeeded' });
  }, 240_000);
});
