// A worker SIGKILLed in the window between the toolbox finishing an edit and the worker saving
// its result: the step is redone by another operator, the edit is sent again under the same
// call id, and the toolbox answers it from its journal. The README is greeted once
// ("Hello, world", never "Hello, world, world").
//
// The window is made certain, not hoped for: the test holds the toolbox's lock on README.md
// (a lock file holding a live process's pid, as a holder's does), sees the edit call start in
// the toolbox (the call journal takes a lock of its own for the call, named after its call id;
// the worker has saved the step's calls by then), stops the worker process (SIGSTOP) so it cannot
// save a result, releases the lock, waits for the edit to land in the workspace and the answer
// to be sent, and SIGKILLs the worker. (Stalling Redis instead is not enough: a stopped Redis
// still holds the worker's save in its socket and runs it when it resumes. A FIFO at the lock's
// name, which this test used before, is now removed by the toolbox at once.)
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
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
import { journalKey } from '../../operator/src/workers/tool-execution.ts';

/** A file the test makes beside the planted lock once it stands: the first turn waits for it. */
const PLANTED_MARK = 'planted';

const TURNS: ScriptTurn[] = [
  // Holds the run until the test has planted its lock, so the edit cannot come first.
  {
    toolCalls: [bashCall(`until [ -e "$CHAMVI_HOME/locks/${PLANTED_MARK}" ]; do sleep 0.1; done`)],
    usage: usage(10, 1),
  },
  { toolCalls: [GREET_WORLD], usage: usage(20, 2) },
  { text: 'Greeted the world.', usage: usage(30, 3) },
];

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Where file-locks.ts puts the lock of a key (a file's real path, a journal entry), under the home. */
const lockFileOf = (home: string, key: string) => path.join(home, 'locks', `${sha256(key).slice(0, 32)}.lock`);

/**
 * The lock call-journal.ts holds while the only call of a step runs, named after its call id,
 * which the scripted model makes from its turn (scripted-language-model.ts): step 1 is turn 0.
 */
const journalLockOf = (home: string, step: number) => {
  const callId = journalKey(step, { toolCallId: `scripted-t${step - 1}-c0` } as Parameters<typeof journalKey>[1]);
  return lockFileOf(home, `journal:${sha256(callId).slice(0, 40)}`);
};

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
  const planted = lockFileOf(homeDir, path.join(workspaceDir, 'README.md'));
  // The first turn's bash call is running once its journal lock stands: the toolbox's home is
  // made by then (the workspace is registered before it is, and a lock planted sooner went with
  // the home's making).
  const firstCall = journalLockOf(homeDir, 1);
  await eventually(async () => (existsSync(firstCall) ? true : undefined), 60_000, "the first turn's bash call to start");
  // A holder's lock: this process's pid, alive, so the toolbox's edit waits for it (file-locks.ts).
  writeFileSync(planted, String(process.pid));
  writeFileSync(path.join(homeDir, 'locks', PLANTED_MARK), '');
  // Found by its name, not as "a lock that is new": the edit starts within milliseconds of the
  // first call's end, often before a poll sees that end, and a lock taken as already standing
  // was never seen as new (the edit then waited out its 30 s and the run ended under the test).
  const editCall = journalLockOf(homeDir, 2);
  await eventually(
    async () => (existsSync(editCall) ? true : undefined),
    60_000,
    'the edit call to start in the toolbox and wait on the README.md lock',
  );
  void first.kill('SIGSTOP'); // resolves only when it exits
  unlinkSync(planted);
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
