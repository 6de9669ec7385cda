// SIGKILL the operator while its runs stand in every phase at once, start a fresh process,
// and every run still finishes exactly as if nothing had happened: one sandbox pod ever,
// the right diff, and usage and step counts equal to the model's script.
//
// Each run is held in its phase by something outside the operator, so the kill lands
// where it is meant to:
//   provision  its pod has just been created (the census saw it), nothing after
//   clone      prepare is running spec.sandbox.setup, which sleeps the first time
//   step       the model call of step 2 waits on a delayed reply of the fake server
//   tools      step 2's edit is done while its bash call (run beside it) still sleeps
//   approval   WaitingForApproval; it is approved only after the restart
//   finalize   the diff is being taken: the agent's last tool call puts a FIFO where git
//              opens the object store's alternates, so the next git to read the objects waits
//              until the test lets it go (git-objects-hold.ts), after the kill. That git is the
//              diff snapshot after that step (#13.3; every file-changing step takes one), before
//              finalize. Holding finalize itself needs a hold armed after the last snapshot:
//              not built yet.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisUrl } from '../support/cluster.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import {
  GREETED,
  GREET_WORLD,
  DIFF_STAT,
  type ObjectCensus,
  PROMPT_TOKENS,
  READ_README,
  type RunNamespace,
  bashCall,
  codingRun,
  expectedTotals,
  operatorStory,
  scriptConfigMap,
  scriptedModel,
  usage,
  type RunStatus,
  type ScriptTurn,
} from '../support/fault-fixture.ts';
import { FaultScene } from '../support/fault-scene.ts';
import { eventually, type OperatorProcess } from '../support/operator-process.ts';
import type { SandboxExecRegistrar } from '../support/sandbox-exec-registrar.ts';
import { HOLD_GIT_OBJECTS, holdGitObjects, type GitObjectsHold } from './git-objects-hold.ts';
import { SANDBOX_DENY_ALL_POLICY } from '../../operator/src/reconcile/sandbox-network-policy.ts';

const API_KEY = 'sk-faults-kill-0123456789';
// A short job lock: the fresh process's workers take over the killed one's jobs quickly.
const JOB_LOCK_SECONDS = '4';
const HOLD_SECONDS = 120;

// The first time it runs, setup sleeps (holding prepare); a redone prepare skips it.
const HELD_SETUP = `if [ ! -e .git/held-setup ]; then touch .git/held-setup; sleep ${HOLD_SECONDS}; fi`;
const SCRIPTS: Record<string, ScriptTurn[]> = {
  provision: [
    { toolCalls: [READ_README], usage: usage(100, 10) },
    { toolCalls: [GREET_WORLD], usage: usage(200, 20) },
    { text: 'Greeted the world.', usage: usage(300, 30) },
  ],
  clone: [
    { toolCalls: [READ_README], usage: usage(110, 11) },
    { toolCalls: [GREET_WORLD], usage: usage(210, 21) },
    { text: 'Greeted the world.', usage: usage(310, 31) },
  ],
  approval: [
    { toolCalls: [GREET_WORLD], usage: usage(120, 12) },
    { toolCalls: [DIFF_STAT], usage: usage(220, 22) },
    { text: 'Greeted the world.', usage: usage(320, 32) },
  ],
  finalize: [
    { toolCalls: [GREET_WORLD], usage: usage(130, 13) },
    { toolCalls: [bashCall(HOLD_GIT_OBJECTS)], usage: usage(230, 23) },
    { text: 'Greeted the world.', usage: usage(330, 33) },
  ],
};
// The fake server's script for `step`: its second reply is held; the redone step gets the copy.
// Over HTTP, so with figures an endpoint could count (PROMPT_TOKENS).
const STEP_TURNS: ScriptTurn[] = [
  { toolCalls: [READ_README], usage: usage(PROMPT_TOKENS + 140, 14) },
  { toolCalls: [GREET_WORLD], usage: usage(PROMPT_TOKENS + 240, 24) },
  { text: 'Greeted the world.', usage: usage(PROMPT_TOKENS + 340, 34) },
];
// For `tools` (its own fake server): the edit and the shell run side by side; the shell sleeps once.
const TOOLS_TURNS: ScriptTurn[] = [
  { toolCalls: [READ_README], usage: usage(PROMPT_TOKENS + 150, 15) },
  {
    toolCalls: [GREET_WORLD, bashCall(`if [ ! -e .git/held-tools ]; then touch .git/held-tools; sleep ${HOLD_SECONDS}; fi`)],
    usage: usage(PROMPT_TOKENS + 250, 25),
  },
  { text: 'Greeted the world.', usage: usage(PROMPT_TOKENS + 350, 35) },
];

let scene: FaultScene;
let ns: RunNamespace;
let repoUrl: string;
let census: ObjectCensus;
let registrar: SandboxExecRegistrar;
let fake: FakeOpenAIServer;
let toolsFake: FakeOpenAIServer;
let first: OperatorProcess;
let second: OperatorProcess | undefined;
let takeoverMs = 0;
// finalize's take, held in git until the first process is gone.
let finalizeHold: GitObjectsHold | undefined;
const atKill: Record<string, RunStatus & { stage?: string }> = {};

// Security #11.3: the fake model endpoints are the only ones a run may name.
const operator = (identity: string): OperatorProcess =>
  scene.startOperator(identity, { CHAMVI_ALLOW_MODEL_ENDPOINTS: `${fake.baseURL},${toolsFake.baseURL}` });

const workspaceOf = async (run: string) => registrar.workspaceOf(ns.name, (await ns.derivedNames(run)).pod);
const workspaceFile = async (run: string, file: string) => {
  const workspace = await workspaceOf(run);
  return workspace !== undefined && existsSync(join(workspace.workspaceDir, file));
};

beforeAll(async () => {
  scene = await FaultScene.start({
    namespace: 'faults-kill',
    census: true,
    operator: false,
    env: { CHAMVI_JOB_LOCK_SECONDS: JOB_LOCK_SECONDS },
  });
  ({ ns, repoUrl, census, registrar } = scene);
  fake = await startFakeOpenAIServer();
  const fakeTurn = (turn: ScriptTurn) =>
    turn.toolCalls
      ? {
          type: 'tool-calls' as const,
          toolCalls: turn.toolCalls.map((call) => ({ name: call.toolName, arguments: call.input })),
          usage: { promptTokens: turn.usage!.inputTokens, completionTokens: turn.usage!.outputTokens },
        }
      : {
          type: 'text' as const,
          text: turn.text!,
          usage: { promptTokens: turn.usage!.inputTokens, completionTokens: turn.usage!.outputTokens },
        };
  fake.enqueue(
    fakeTurn(STEP_TURNS[0]!),
    { ...fakeTurn(STEP_TURNS[1]!), delayMs: HOLD_SECONDS * 1000 },
    fakeTurn(STEP_TURNS[1]!),
    fakeTurn(STEP_TURNS[2]!),
  );
  toolsFake = await startFakeOpenAIServer();
  toolsFake.enqueue(...TOOLS_TURNS.map(fakeTurn));

  first = operator('faults-kill-first');
  await first.waitForLog('caches synced; reconciling', 60_000);
  await ns.apply(
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'llm', labels: { 'chamvi.dev/usable-by-runs': 'true' } },
      stringData: { apiKey: API_KEY },
    },
    ...Object.entries(SCRIPTS).map(([name, turns]) => scriptConfigMap(`${name}-script`, turns)),
  );
  await ns.apply(
    codingRun('clone', repoUrl, scriptedModel('clone-script'), { sandbox: { setup: HELD_SETUP } }),
    codingRun('step', repoUrl, {
      provider: 'openai-compatible',
      name: 'fake-coder',
      baseURL: fake.baseURL,
      apiKeySecretRef: { name: 'llm' },
    }),
    codingRun('approval', repoUrl, scriptedModel('approval-script'), { approval: { tools: ['bash'] } }),
    codingRun('finalize', repoUrl, scriptedModel('finalize-script')),
    codingRun('tools', repoUrl, {
      provider: 'openai-compatible',
      name: 'fake-coder',
      baseURL: toolsFake.baseURL,
      apiKeySecretRef: { name: 'llm' },
    }),
  );
  const held = (what: string, check: () => Promise<boolean | undefined> | boolean | undefined) =>
    eventually(async () => ((await check()) ? true : undefined), 120_000, what);
  await Promise.all([
    held('clone to sleep in setup', () => workspaceFile('clone', '.git/held-setup')),
    held('step to wait on its second model call', () => fake.requests.length >= 2),
    held('approval to wait', async () => (await ns.status('approval')).phase === 'WaitingForApproval'),
    holdGitObjects(async () => (await workspaceOf('finalize'))?.workspaceDir, 120_000, 'finalize to wait in git').then((hold) => {
      finalizeHold = hold;
    }),
    held('tools to have edited and to sleep in bash', async () => {
      const workspace = await workspaceOf('tools');
      return (
        (await workspaceFile('tools', '.git/held-tools')) &&
        readFileSync(join(workspace!.workspaceDir, 'README.md'), 'utf8').startsWith('Hello, world\n')
      );
    }),
  ]).catch((error: unknown) => {
    console.error(operatorStory(first));
    throw error;
  });

  // The last run is killed in the watch event that shows its new pod (named after the run's
  // uid, which is not known before the run is created: matched by its shape).
  const killed = new Promise<void>((resolve) =>
    census.onFirstSight('pods', /^provision-[0-9a-f]{16}-sandbox$/, () => {
      void first.kill('SIGKILL');
      resolve();
    }),
  );
  await ns.apply(codingRun('provision', repoUrl, scriptedModel('provision-script')));
  await killed;
  await first.exited;
  const killedAt = Date.now();

  const redis = new Redis(redisUrl());
  try {
    for (const name of ['provision', 'clone', 'step', 'approval', 'finalize', 'tools']) {
      const run = await ns.run(name);
      const state = await redis.get(`${scene.prefix}:run:${run.metadata.uid}`);
      // The state is sealed (Security #11.1): its JSON follows the first line, the seal.
      atKill[name] = {
        ...run.status,
        ...(state ? { stage: (JSON.parse(state.slice(state.indexOf('\n') + 1)) as { stage: string }).stage } : {}),
      };
    }
  } finally {
    redis.disconnect();
  }
  // The killed process's take goes on and ends; the fresh one's takes find no FIFO.
  finalizeHold?.release();
  console.info(
    `at the kill: ${JSON.stringify(Object.fromEntries(Object.entries(atKill).map(([name, status]) => [name, `${status.phase ?? 'new'}/${status.stage ?? 'no state'} steps=${status.steps ?? 0}`])))}`,
  );

  second = operator('faults-kill-second');
  // Answered after the restart: only the new leader can pass it on.
  await ns.answer('approval', atKill.approval!.pendingApproval!.id, 'approve');
  await second.waitForLog('became leader', 60_000);
  takeoverMs = Date.now() - killedAt;
  console.info(`the fresh operator led ${takeoverMs} ms after the kill`);
}, 300_000);

afterAll(async () => {
  finalizeHold?.release();
  await first?.kill('SIGKILL');
  await scene?.stop();
  await fake?.stop();
  await toolsFake?.stop();
});

async function expectFinishedCleanly(name: string, turns: ScriptTurn[]): Promise<RunStatus> {
  const status = await ns.finished(name, 180_000).catch((error: unknown) => {
    console.error(`-- first\n${operatorStory(first)}\n-- second\n${second ? operatorStory(second) : ''}`);
    throw error;
  });
  const totals = expectedTotals(turns);
  expect(status, JSON.stringify(status)).toMatchObject({
    phase: 'Succeeded',
    reason: 'Completed',
    steps: totals.steps,
    toolCalls: totals.toolCalls,
  });
  expect(status.usage).toEqual(totals.usage);
  expect(status.result!.diff).toContain(GREETED);
  const names = await ns.derivedNames(name);
  expect(status.result).toMatchObject({ filesChanged: 1, insertions: 1, deletions: 1, diffConfigMap: names.diff });
  expect(await ns.diffConfigMap(name)).toBe(status.result!.diff);
  // The pod goes once the run is done; by then the census has seen every pod it ever had.
  await eventually(
    async () => (census.count('pods', names.pod) > 0 && !census.exists('pods', names.pod) ? true : undefined),
    60_000,
    `${name}'s pod to go`,
  );
  expect(census.count('pods', names.pod), 'sandbox pods the run ever had').toBe(1);
  // One for every run of the namespace, made once (a second uid would be one made again).
  expect(census.count('networkpolicies', SANDBOX_DENY_ALL_POLICY)).toBe(1);
  expect(census.count('configmaps', names.diff)).toBe(1);
  return status;
}

describe('an operator SIGKILLed with runs in every phase', () => {
  it('hands over to a fresh process within the lease time', () => {
    // leaseDurationSeconds 15 + retryPeriodSeconds 2 (operator-config.ts defaults) and a margin.
    expect(takeoverMs).toBeLessThan(25_000);
  });

  it('finishes a run killed while its pod was being created', async () => {
    await expectFinishedCleanly('provision', SCRIPTS.provision!);
  });

  it('finishes a run killed while prepare ran its setup (clone done, loop not started)', async () => {
    expect(atKill.clone).toMatchObject({ phase: 'Running' });
    expect(atKill.clone!.stage).toBeUndefined();
    await expectFinishedCleanly('clone', SCRIPTS.clone!);
  });

  it('finishes a run killed inside a model call, redoing that step once', async () => {
    expect(atKill.step).toMatchObject({ phase: 'Running', steps: 1, stage: 'stepping' });
    await expectFinishedCleanly('step', STEP_TURNS);
    // Two requests for step 2 (the held one and the redo), one for each other step.
    expect(fake.requests).toHaveLength(4);
  });

  it('finishes a run killed while its step ran tools, without asking the model again or repeating the finished edit', async () => {
    expect(atKill.tools).toMatchObject({ phase: 'Running', steps: 1, stage: 'stepping' });
    const status = await expectFinishedCleanly('tools', TOOLS_TURNS);
    expect(status.result!.diff).not.toContain('world, world');
    expect(toolsFake.requests).toHaveLength(TOOLS_TURNS.length);
  });

  it('finishes a run killed while it waited for approval, approved after the restart', async () => {
    expect(atKill.approval).toMatchObject({ phase: 'WaitingForApproval', stage: 'waiting' });
    await expectFinishedCleanly('approval', SCRIPTS.approval!);
  });

  it('finishes a run killed while the diff snapshot after its last tool step was being taken', async () => {
    // Step 2's snapshot holds it: its status (steps: 2) is written only after the snapshot.
    expect(atKill.finalize).toMatchObject({ phase: 'Running', steps: 1, stage: 'stepping' });
    await expectFinishedCleanly('finalize', SCRIPTS.finalize!);
  });
});
