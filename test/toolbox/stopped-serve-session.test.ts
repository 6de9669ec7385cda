// A serve toolbox stopped from inside (`kill -STOP $PPID`) stays in the sandbox container after
// the operator drops its session (over pods/exec that only closes the websocket), holding the
// journal lock of the call it was running: the redo of that call, same call id, in a new
// session waited out REPEAT_WAIT (30.5 min). A new serve session now kills stopped toolboxes of
// earlier exec sessions first (stopped-sessions.ts). The container is a real PID namespace
// (unshare) whose PID 1 idles on IDLE_SCRIPT; sessions enter it as an exec does (nsenter: their
// parent is outside, so their ppid reads 0). Needs root for the namespace; skipped without.
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { IDLE_SCRIPT } from '../../sandbox-image/toolbox/contract/sandbox-init.ts';
import { decodeResponse, encodeRequest } from '../../sandbox-image/toolbox/contract/protocol.ts';
import type { ToolResponse } from '../../sandbox-image/toolbox/contract/tool-results.ts';
import { alive, makeWorkspace, TOOLBOX, type Workspace } from './toolbox-fixture.ts';

const canMakeContainer = process.platform === 'linux' && spawnSync('unshare', ['-p', '-f', '--mount-proc', 'true']).status === 0;

/** The only child of a process, as the host numbers it (polled: it is forked right after the start). */
async function childOf(pid: number): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    if (children) return Number(children.split(' ')[0]);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`process ${pid} started no child`);
}

interface Session {
  /** The toolbox's pid as the host numbers it. */
  pid: number;
  call(request: { tool: string; input: unknown; callId?: string }, withinMs: number): Promise<ToolResponse | 'no answer'>;
}

let workspace: Workspace;
let init: ChildProcessWithoutNullStreams;
let initPid: number;
const started: ChildProcessWithoutNullStreams[] = [];

beforeEach(async () => {
  workspace = makeWorkspace();
  if (!canMakeContainer) return;
  init = spawn('unshare', ['-p', '-f', '--mount-proc', process.execPath, '-e', IDLE_SCRIPT]);
  initPid = await childOf(init.pid!);
});
afterEach(() => {
  // PID 1 of a namespace dying takes every process in it along.
  if (canMakeContainer) process.kill(initPid, 'SIGKILL');
  for (const child of started.splice(0)) child.kill('SIGKILL');
  workspace.cleanup();
});

/** Runs `argv` in the container as a pods/exec session would (ppid 0 inside). */
function exec(argv: string[]): ChildProcessWithoutNullStreams {
  const child = spawn('nsenter', ['-t', String(initPid), '-p', '-m', '--', ...argv]);
  started.push(child);
  return child;
}

async function openServe(): Promise<Session> {
  const child = exec([process.execPath, TOOLBOX, '--root', workspace.root, '--home', workspace.home, 'serve']);
  const answers = new Map<number, (response: ToolResponse) => void>();
  let buffered = '';
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    for (let newline = buffered.indexOf('\n'); newline >= 0; newline = buffered.indexOf('\n')) {
      const reading = decodeResponse(buffered.slice(0, newline));
      buffered = buffered.slice(newline + 1);
      if (reading.kind === 'response') answers.get(reading.id as number)?.(reading.response);
    }
  });
  child.stdin.on('error', () => undefined);
  let nextId = 1;
  return {
    pid: await childOf(child.pid!),
    call: (request, withinMs) =>
      new Promise((resolve) => {
        const id = nextId++;
        const timer = setTimeout(() => resolve('no answer'), withinMs);
        answers.set(id, (response) => {
          clearTimeout(timer);
          resolve(response);
        });
        child.stdin.write(encodeRequest({ id, ...request }));
      }),
  };
}

const stdoutOf = (answer: ToolResponse | 'no answer') =>
  answer !== 'no answer' && answer.ok ? (answer.result as { stdout: string }).stdout : answer;
const stateOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
};

describe.skipIf(!canMakeContainer)('a serve session started in the sandbox container', () => {
  it('kills the toolbox an earlier session stopped from inside, and answers that call id promptly', async () => {
    const first = await openServe();
    // The first try stops its own toolbox while holding the call's journal lock; the redo does not.
    const stopsOnce = { command: '[ -e stopped ] || { touch stopped; kill -STOP $PPID; }; echo done' };
    expect(await first.call({ tool: 'bash', input: stopsOnce, callId: 'step-1/call-1' }, 2_000)).toBe('no answer');
    expect(stateOf(first.pid)).toBe('T');

    const second = await openServe();
    const redo = await second.call({ tool: 'bash', input: stopsOnce, callId: 'step-1/call-1' }, 10_000);
    expect(stdoutOf(redo)).toBe('done\n');
    expect(alive(first.pid)).toBe(false);
  }, 30_000);

  it('leaves running sessions, stopped processes that are not a session toolbox, and stopped toolboxes the sandbox started', async () => {
    const running = await openServe();
    expect(stdoutOf(await running.call({ tool: 'bash', input: { command: 'echo up' } }, 5_000))).toBe('up\n');
    // An exec session that is not the toolbox, stopped.
    const sleeper = exec(['sleep', '60']);
    const sleeperPid = await childOf(sleeper.pid!);
    process.kill(sleeperPid, 'SIGSTOP');
    // A toolbox the sandbox's own code started (its parent is inside the container), stopped.
    const toolbox = `${process.execPath} ${TOOLBOX} --root ${workspace.root} --home ${workspace.home} serve`;
    const own = await running.call(
      { tool: 'bash', input: { command: `(exec setsid ${toolbox} < <(sleep 60) >/dev/null 2>&1) & sleep 0.5; kill -STOP $!; echo $!` } },
      5_000,
    );
    const ownPid = Number(String(stdoutOf(own)).trim());
    expect(ownPid).toBeGreaterThan(1);
    const stateInside = { tool: 'bash', input: { command: `cut -d' ' -f3 /proc/${ownPid}/stat` } };
    expect(stdoutOf(await running.call(stateInside, 5_000))).toBe('T\n');
    const ownArgv = await running.call({ tool: 'bash', input: { command: `tr '\\0' ' ' < /proc/${ownPid}/cmdline` } }, 5_000);
    expect(stdoutOf(ownArgv)).toBe(`${toolbox} `);

    const second = await openServe();
    expect(stdoutOf(await second.call({ tool: 'bash', input: { command: 'echo fresh' } }, 5_000))).toBe('fresh\n');
    expect(stdoutOf(await running.call({ tool: 'bash', input: { command: 'echo still' } }, 5_000))).toBe('still\n');
    expect(stateOf(sleeperPid)).toBe('T');
    expect(stdoutOf(await second.call(stateInside, 5_000))).toBe('T\n');
  }, 30_000);
});
