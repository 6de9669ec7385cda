// A worker SIGKILLed in the window between the toolbox finishing an edit and the worker saving
// its result: the step is redone by another operator, the edit is sent again under the same
// call id, and the toolbox answers it from its journal. The README is greeted once
// ("Hello, world", never "Hello, world, world").
//
// The window is made certain, not hoped for: the test holds the toolbox's lock on README.md
// (a FIFO where the lock file goes, so the test sees the moment the toolbox waits on it; the
// worker has saved the step's calls by then), stops the worker process (SIGSTOP) so it cannot
// save a result, releases the lock, waits for the edit to land in the workspace and the
// answer to be sent, and SIGKILLs the worker. (Stalling Redis instead is not enough: a
// stopped Redis still holds the worker's save in its socket and runs it when it resumes.)
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, constants, mkdirSync, openSync, readFileSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GREETED,
  GREET_WORLD,
  HELLO_FILES,
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
import { eventually } from '../support/operator-process.ts';

const TURNS: ScriptTurn[] = [
  // Holds the run until the test has put its FIFO in place, so the edit cannot come first.
  { toolCalls: [bashCall('until [ -n "$(find "$CHAMVI_HOME/locks" -type p 2>/dev/null)" ]; do sleep 0.1; done')], usage: usage(10, 1) },
  { toolCalls: [GREET_WORLD], usage: usage(20, 2) },
  { text: 'Greeted the world.', usage: usage(30, 3) },
];

/** Where file-locks.ts puts the lock of a file: the sha256 of its real path, under the home. */
const lockFileOf = (home: string, realFile: string) =>
  path.join(home, 'locks', `${createHash('sha256').update(realFile).digest('hex').slice(0, 32)}.lock`);

let scene: FaultScene;
let status: RunStatus;
let readme = '';

beforeAll(async () => {
  scene = await FaultScene.start({
    namespace: 'faults-tool-once',
    operator: false,
    env: { CHAMVI_JOB_LOCK_SECONDS: '4', CHAMVI_WORKER_CONCURRENCY: '1' },
  });
  const { ns, repoUrl } = scene;
  await ns.apply(scriptConfigMap('greet-script', TURNS));
  const first = scene.startOperator('faults-tool-once-a');
  await first.waitForLog('caches synced; reconciling', 60_000);
  await ns.apply(codingRun('greet', repoUrl, scriptedModel('greet-script')));

  const { workspaceDir, homeDir } = await scene.registrar.waitForWorkspace(ns.name, (await ns.derivedNames('greet')).pod, 60_000);
  const fifo = lockFileOf(homeDir, path.join(workspaceDir, 'README.md'));
  mkdirSync(path.dirname(fifo), { recursive: true });
  execFileSync('mkfifo', [fifo]);
  // Opening the write end without blocking works only once a reader has it open: the toolbox,
  // inside the edit call, reading who holds the lock.
  const writer = await eventually(
    async () => openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK),
    60_000,
    'the toolbox to wait on the README.md lock',
  );
  void first.kill('SIGSTOP'); // resolves only when it exits
  unlinkSync(fifo);
  closeSync(writer);
  const readmePath = path.join(workspaceDir, 'README.md');
  await eventually(async () => (readFileSync(readmePath, 'utf8').includes('world') ? true : undefined), 30_000, 'the edit to land');
  // The answer is on its way to the stopped worker, which cannot save it.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  await first.kill('SIGKILL');
  const second = scene.startOperator('faults-tool-once-b');
  status = await ns.finished('greet', 120_000).catch((error: unknown) => {
    console.error(`-- first\n${operatorStory(first)}\n-- second\n${operatorStory(second)}`);
    throw error;
  });
  readme = readFileSync(readmePath, 'utf8');
}, 300_000);

afterAll(async () => {
  await scene?.stop();
});

describe('a worker killed after the toolbox finished an edit and before its result was saved', () => {
  it('redoes the step and the edit applies once', () => {
    expect(readme).toBe(HELLO_FILES['README.md']!.replace('Hello', 'Hello, world'));
    expect(status.result!.diff).toContain(GREETED);
    expect(status.result!.diff).not.toContain('world, world');
  });

  it('finishes the run as scripted', () => {
    const totals = expectedTotals(TURNS);
    expect(status).toMatchObject({ phase: 'Succeeded', steps: totals.steps, toolCalls: totals.toolCalls });
  });
});
