// What the model and the transcript are told of a tool call at the run's deadline, with the
// bundled toolbox behind the real ToolboxSandbox and its kept session: a call whose session was
// still starting at the deadline was never written, so it is answered as not sent (and never
// runs); a call of a step redone after a failed try is not said to have "not run" when that try
// ran it. The toolbox's journal shows which calls ran: it answers a call id only once it ran.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { DEFAULT_TOOLBOX_PATH } from '../../operator/src/sandbox/local-sandbox.ts';
import { LocalProcessTransport } from '../../operator/src/sandbox/local-process-transport.ts';
import type { Sandbox, ToolRequest } from '../../operator/src/sandbox/sandbox.ts';
import { ToolboxSandbox } from '../../operator/src/sandbox/toolbox-sandbox.ts';
import type { ToolboxTransport } from '../../operator/src/sandbox/toolbox-transport.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { runInFlightCalls } from '../../operator/src/workers/run-tool-calls.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { executeToolCalls, journalKey, withRunDeadline } from '../../operator/src/workers/tool-execution.ts';
import { makeWorkspace, type Workspace } from './toolbox-fixture.ts';

const UNSENT_TEXT =
  "TIMEOUT: the run's spec.budget.timeout had passed before this call was sent, so it did not run; the run ends with its partial diff";
const UNSENT_AGAIN_TEXT =
  "TIMEOUT: the run's spec.budget.timeout had passed, so this call was not sent again after the run's deadline; an earlier try of this step may have run it, and what it changed is then in the partial diff; the run ends with its partial diff";

let workspace: Workspace;
let sandbox: ToolboxSandbox;
/** Toolbox processes started, and whether the last start has finished. */
let starts: { begun: number; done: boolean };

/** A serve-mode sandbox whose sessions take `startMs` to start, as an exec on a busy node does. */
function slowSandbox(startMs: number): ToolboxSandbox {
  const local = new LocalProcessTransport({ toolboxPath: DEFAULT_TOOLBOX_PATH, workspaceDir: workspace.root, homeDir: workspace.home });
  const slow: ToolboxTransport = {
    start: async (args) => {
      starts.begun += 1;
      starts.done = false;
      await new Promise((resolve) => setTimeout(resolve, startMs));
      const started = await local.start(args);
      starts.done = true;
      return started;
    },
  };
  return new ToolboxSandbox(slow, { mode: 'serve' });
}

beforeEach(() => {
  workspace = makeWorkspace();
  starts = { begun: 0, done: false };
});
afterEach(async () => {
  await sandbox.close();
  workspace.cleanup();
});

const write = { toolCallId: 'w1', toolName: 'write_file', input: { path: 'a.txt', content: 'hello\n' } };

describe('a call whose session was still starting at the deadline', () => {
  it('is answered as not sent, and never runs', async () => {
    sandbox = slowSandbox(400);
    const touch = { toolCallId: 'b1', toolName: 'bash', input: { command: 'touch ran.txt' } };
    const [result] = await withRunDeadline(100, (deadline) => executeToolCalls(sandbox, [touch], undefined, deadline, undefined, 8));
    expect(result?.text).toBe(UNSENT_TEXT);
    // Answered at the deadline, not once the session it waited for had started.
    expect(starts).toEqual({ begun: 1, done: false });
    // The session starts on (for the calls after), and is never given the call.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(starts.done).toBe(true);
    expect(existsSync(path.join(workspace.root, 'ran.txt'))).toBe(false);
    expect(await sandbox.call({ tool: 'bash', input: { command: 'ls' } })).toMatchObject({ ok: true });
    expect(existsSync(path.join(workspace.root, 'ran.txt'))).toBe(false);
  });
});

describe('a write an earlier try ran, its step redone past the deadline', () => {
  const TIMEOUT_MS = 600_000;
  const STARTED_AT = Date.parse('2026-12-07T10:00:00Z');
  const run = {
    metadata: { name: 'run-1', namespace: 'agents', uid: 'uid-1' },
    spec: { approval: { tools: [] }, model: { provider: 'scripted', name: 'script' }, budget: { timeout: '10m' } },
  } as unknown as ParsedCodingRun;

  /** The step as saved before its calls ran: the model's answer and its write, no result yet. */
  function savedState(): RunState {
    const state = startingState({ uid: 'uid-1', namespace: 'agents', name: 'run-1' }, STARTED_AT);
    state.step = 1;
    state.inFlight = { calls: [write], results: [], earlier: [], hadToolCalls: true, toolNames: ['write_file'], text: '', resumed: false };
    return state;
  }

  /** What runInFlightCalls uses of a worker's dependencies; `sent` lists the step's calls that reached the sandbox (not the diff it takes after them). */
  function dependencies(now: number, save: () => Promise<void>) {
    const sent: ToolRequest[] = [];
    const counting: Sandbox = {
      call: (request, options) => {
        if (request.callId !== undefined) sent.push(request);
        return sandbox.call(request, options);
      },
      importTree: (tar, options) => sandbox.importTree(tar, options),
      close: () => sandbox.close(),
    };
    const deps = {
      sandboxes: { for: () => counting },
      metrics: { toolCalls: { inc: () => undefined }, toolDuration: { observe: () => undefined } },
      states: { save },
      resources: { writeDiff: async () => ({ outcome: 'written', configMap: 'run-1-diff' }) },
      logger: { info: () => undefined, warn: () => undefined },
      now: () => new Date(now),
    } as unknown as AgentDependencies;
    return { deps, sent };
  }

  /** The tool message's text for the write, as the model and the transcript get it. */
  const writeResultText = (state: RunState): string => {
    const message = state.messages.at(-1)!;
    const part = (message.content as { toolCallId: string; output: { value: string } }[]).find((each) => each.toolCallId === 'w1');
    return part!.output.value;
  };

  it('is not said to have not run: an earlier try may have run it', async () => {
    sandbox = slowSandbox(0);
    // Try 1, well within the deadline: the write runs, and keeping the step fails (a Redis blip).
    const first = dependencies(STARTED_AT + 60_000, async () => {
      throw new Error('Redis did not answer');
    });
    await expect(runInFlightCalls(first.deps, run, savedState())).rejects.toThrow('Redis did not answer');
    expect(first.sent.map((request) => request.callId)).toEqual([journalKey(1, write)]);
    expect(readFileSync(path.join(workspace.root, 'a.txt'), 'utf8')).toBe('hello\n');

    // The retry, 2 s after the deadline, from the state as saved before the calls: the write is sent no more.
    const retry = dependencies(STARTED_AT + TIMEOUT_MS + 2_000, async () => undefined);
    const state = savedState();
    await runInFlightCalls(retry.deps, run, state, true);
    expect(retry.sent).toEqual([]);
    expect(writeResultText(state)).toBe(UNSENT_AGAIN_TEXT);
    expect(writeResultText(state)).not.toContain('did not run');
    // It had run: the file is in the workspace (so in the partial diff), and the toolbox's
    // journal answers its call id without writing again.
    expect(readFileSync(path.join(workspace.root, 'a.txt'), 'utf8')).toBe('hello\n');
    workspace.write({ 'a.txt': 'changed since\n' });
    expect(await sandbox.call({ tool: 'write_file', input: write.input, callId: journalKey(1, write) })).toEqual({
      ok: true,
      result: { path: 'a.txt', bytes: 6 },
    });
    expect(readFileSync(path.join(workspace.root, 'a.txt'), 'utf8')).toBe('changed since\n');
  });

  it('in the first try of a step, is told it did not run, and did not', async () => {
    sandbox = slowSandbox(0);
    const { deps, sent } = dependencies(STARTED_AT + TIMEOUT_MS + 2_000, async () => undefined);
    const state = savedState();
    await runInFlightCalls(deps, run, state);
    expect(sent).toEqual([]);
    expect(writeResultText(state)).toBe(UNSENT_TEXT);
    expect(existsSync(path.join(workspace.root, 'a.txt'))).toBe(false);
  });
});
