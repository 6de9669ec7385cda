// executeToolCall: an answer the transport refuses as too large reaches the model as a tool
// error it can act on; any other SandboxError still propagates. capToolCalls: the calls past a
// step's cap are answered with a tool error that tells the model how many calls it made.
import { describe, expect, it } from 'vitest';
import type { Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import { capToolCalls, executeToolCall, MAX_TOOL_CALLS_PER_STEP } from '../../operator/src/workers/tool-execution.ts';

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
