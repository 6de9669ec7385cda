// executeToolCall: an answer the transport refuses as too large reaches the model as a tool
// error it can act on; any other SandboxError still propagates. capToolCalls: the calls past a
// step's cap are answered with a tool error that tells the model how many calls it made.
// executeToolCalls: calls on one file, however spelt, never overlap; other calls do.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Sandbox, ToolRequest } from '../../operator/src/sandbox/sandbox.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import { capToolCalls, executeToolCall, executeToolCalls, MAX_TOOL_CALLS_PER_STEP } from '../../operator/src/workers/tool-execution.ts';

const failingWith = (error: SandboxError): Sandbox => ({
  call: () => Promise.reject(error),
  importTree: () => Promise.resolve(),
  close: () => Promise.resolve(),
});

const call = { toolCallId: 'c1', toolName: 'list_files', input: {} };

describe('executeToolCall', () => {
  it('answers an oversized toolbox answer as a TOO_LARGE tool error', async () => {
    const record = await executeToolCall(failingWith(new SandboxError('RESPONSE_TOO_LARGE', 'longer than 8388608 bytes')), call);
    expect(record).toMatchObject({ toolCallId: 'c1', toolName: 'list_files', ok: false });
    expect(record.text).toMatch(/^TOO_LARGE: .*ask for less/);
  });

  it('still throws when the sandbox itself is broken', async () => {
    await expect(executeToolCall(failingWith(new SandboxError('TRANSPORT', 'the toolbox exited')), call)).rejects.toMatchObject({
      reason: 'TRANSPORT',
    });
  });
});

/** A sandbox whose calls each take a few milliseconds, logging when each starts and ends. */
function recordingSandbox() {
  const log: { event: 'start' | 'end'; id: string }[] = [];
  const sandbox: Sandbox = {
    call: async (request: ToolRequest) => {
      const id = (request.callId ?? '').replace(/^s\d+:/, '');
      log.push({ event: 'start', id });
      await sleep(15);
      log.push({ event: 'end', id });
      return { ok: true, result: { path: 'a.ts', bytes: 1 } } as never;
    },
    importTree: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
  return { sandbox, log };
}

/** Whether any two of `ids` were running at the same moment in `log`. */
function overlapped(log: readonly { event: 'start' | 'end'; id: string }[], ids: readonly string[]): boolean {
  let running = 0;
  for (const entry of log.filter((entry) => ids.includes(entry.id))) {
    running += entry.event === 'start' ? 1 : -1;
    if (running > 1) return true;
  }
  return false;
}

describe('executeToolCalls', () => {
  // The toolbox takes all these for one file (path-guard.ts lexicalRelative): spelt differently
  // they ran at once, and the edit could run before the write the model made first (NOT_FOUND).
  it('never overlaps calls on one file however the path is spelt, and keeps their order', async () => {
    const { sandbox, log } = recordingSandbox();
    const spellings = ['a.ts', '/workspace/a.ts', './a.ts', 'src/../a.ts', '/workspace//./a.ts'];
    const calls = spellings.map((path, index) => ({
      toolCallId: `a${index}`,
      toolName: index === 0 ? 'write_file' : 'edit_file',
      input: index === 0 ? { path, content: 'x' } : { path, oldString: 'x', newString: 'y' },
    }));
    await executeToolCalls(sandbox, calls, undefined, undefined, undefined, 1);
    const ids = calls.map((call) => call.toolCallId);
    expect(overlapped(log, ids)).toBe(false);
    expect(log.filter((entry) => entry.event === 'start').map((entry) => entry.id)).toEqual(ids);
  });

  it('still runs calls on different files at once', async () => {
    const { sandbox, log } = recordingSandbox();
    const calls = ['a.ts', '/workspace/b.ts', './src/c.ts'].map((path, index) => ({
      toolCallId: `c${index}`,
      toolName: 'write_file',
      input: { path, content: 'x' },
    }));
    await executeToolCalls(sandbox, calls, undefined, undefined, undefined, 1);
    expect(overlapped(log, ['c0', 'c1', 'c2'])).toBe(true);
  });

  // The toolbox refuses these (OUTSIDE_WORKSPACE); they must not join, nor hold up, a file's chain.
  it('gives a path the toolbox cannot resolve a chain of its own', async () => {
    const { sandbox, log } = recordingSandbox();
    const calls = ['a.ts', '../a.ts', '/workspace2/a.ts'].map((path, index) => ({
      toolCallId: `u${index}`,
      toolName: 'write_file',
      input: { path, content: 'x' },
    }));
    await executeToolCalls(sandbox, calls, undefined, undefined, undefined, 1);
    expect(overlapped(log, ['u0', 'u1'])).toBe(true);
    expect(overlapped(log, ['u0', 'u2'])).toBe(true);
  });
});

describe('capToolCalls', () => {
  const calls = (count: number) =>
    Array.from({ length: count }, (_, index) => ({ toolCallId: `c${index}`, toolName: 'read_file', input: {} }));

  it('runs the first MAX_TOOL_CALLS_PER_STEP calls and answers each of the others with TOO_MANY_CALLS', () => {
    const { run, refused } = capToolCalls(calls(MAX_TOOL_CALLS_PER_STEP + 2));
    expect(run.map((call) => call.toolCallId)).toEqual(calls(MAX_TOOL_CALLS_PER_STEP).map((call) => call.toolCallId));
    expect(refused).toEqual([
      expect.objectContaining({ toolCallId: `c${MAX_TOOL_CALLS_PER_STEP}`, ok: false }),
      expect.objectContaining({ toolCallId: `c${MAX_TOOL_CALLS_PER_STEP + 1}`, ok: false }),
    ]);
    expect(refused[0]?.text).toMatch(/^TOO_MANY_CALLS: this step made 66 tool calls and at most 64 run in one step/);
  });

  // The answer held 300 calls; the SDK was given 65 (providers/with-answer-bounds.ts): the model
  // was told it made 65, and would count its calls wrong in the next step.
  it('tells the model how many calls its answer held, those the SDK never saw included', () => {
    const { run, refused } = capToolCalls(calls(MAX_TOOL_CALLS_PER_STEP + 1), { made: 300 });
    expect(run).toHaveLength(MAX_TOOL_CALLS_PER_STEP);
    expect(refused).toHaveLength(1);
    expect(refused[0]?.text).toMatch(/^TOO_MANY_CALLS: this step made 300 tool calls and at most 64 run in one step/);
  });

  it('runs every call within the cap and refuses none', () => {
    expect(capToolCalls(calls(3), { max: 3 })).toEqual({ run: calls(3), refused: [] });
  });
});
