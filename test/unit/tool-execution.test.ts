// executeToolCall: an answer the transport refuses as too large reaches the model as a tool
// error it can act on; any other SandboxError still propagates. capToolCalls: the calls past a
// step's cap are answered with a tool error that tells the model how many calls it made.
// executeToolCalls: calls on one file, however spelt, never overlap; other calls do. A call that
// throws fails the step's calls: none starts after it, those running are abandoned, and no
// result is kept after it; a tool error is only a result. Past the run deadline no call is
// sent: the rest of a chain is answered TIMEOUT as the call the deadline cut off. A call not
// sent is told it did not run, unless its step is redone (an earlier try may have run it); a
// call the transport gave up on before writing it is not sent either.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { CallOptions, Sandbox, ToolRequest, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import type { ToolResultRecord } from '../../operator/src/workers/run-state.ts';
import {
  capToolCalls,
  executeToolCall,
  executeToolCalls,
  MAX_TOOL_CALLS_PER_STEP,
  withRunDeadline,
} from '../../operator/src/workers/tool-execution.ts';

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

/**
 * A sandbox whose calls each wait for the test to answer them, by call id; a call's promise
 * rejects with SandboxError('ABORTED') when its signal aborts, as both transports do, unless
 * `heedsAbort` is false: then it waits for its answer all the same.
 */
function scriptedSandbox({ heedsAbort = true } = {}) {
  const started: string[] = [];
  const signals = new Map<string, AbortSignal | undefined>();
  const answers = new Map<string, { answer: (response: ToolResponse) => void; fail: (error: Error) => void }>();
  const sandbox: Sandbox = {
    call: (request: ToolRequest, options?: CallOptions) => {
      const id = (request.callId ?? '').replace(/^s\d+:/, '');
      started.push(id);
      signals.set(id, options?.signal);
      return new Promise<ToolResponse>((resolve, reject) => {
        answers.set(id, { answer: resolve, fail: reject });
        if (!heedsAbort) return;
        if (options?.signal?.aborted) return reject(new SandboxError('ABORTED', 'the tool call was aborted'));
        options?.signal?.addEventListener('abort', () => reject(new SandboxError('ABORTED', 'the tool call was aborted')), { once: true });
      });
    },
    importTree: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
  const answer = (id: string, response: ToolResponse = { ok: true, result: { exitCode: 0, stdout: id } } as never) =>
    answers.get(id)!.answer(response);
  const fail = (id: string, error: Error) => answers.get(id)!.fail(error);
  return { sandbox, started, signals, answer, fail };
}

/** Lets every promise chain that can move on do so. */
const settle = () => sleep(5);

const bash = (id: string) => ({ toolCallId: id, toolName: 'bash', input: { command: `echo ${id}` } });
const write = (id: string, path: string) => ({ toolCallId: id, toolName: 'write_file', input: { path, content: 'x' } });

describe('executeToolCalls when a call fails', () => {
  // The step's job fails on the first call that throws and BullMQ runs it again; a call started
  // after that, or still running, saved its older state over the retry's and the run stalled.
  it('starts no call after the one that threw and keeps no result after it', async () => {
    const { sandbox, started, answer, fail } = scriptedSandbox();
    const kept: string[] = [];
    const onResult = async (record: ToolResultRecord) => void kept.push(record.toolCallId);
    const running = executeToolCalls(sandbox, [bash('b1'), bash('b2'), bash('b3'), write('w', 'a.ts')], undefined, undefined, onResult, 4);
    running.catch(() => undefined);
    await settle();
    expect(started).toEqual(['b1', 'w']);
    fail('b1', new SandboxError('TRANSPORT', 'the toolbox exited'));
    await expect(running).rejects.toMatchObject({ reason: 'TRANSPORT' });
    // A transport that does not heed the abort answers anyway: the answer is not kept.
    answer('w');
    await settle();
    expect(started).toEqual(['b1', 'w']);
    expect(kept).toEqual([]);
  });

  // The transports heed the abort; this guard is for one that answers before it reads it.
  it('keeps no answer that arrives after another call failed, even from a sandbox that ignores the abort', async () => {
    const { sandbox, started, signals, answer, fail } = scriptedSandbox({ heedsAbort: false });
    const kept: string[] = [];
    const onResult = async (record: ToolResultRecord) => void kept.push(record.toolCallId);
    const running = executeToolCalls(sandbox, [bash('b1'), write('w', 'a.ts')], undefined, undefined, onResult, 4);
    running.catch(() => undefined);
    await settle();
    expect(started).toEqual(['b1', 'w']);
    fail('b1', new SandboxError('TRANSPORT', 'the toolbox exited'));
    await expect(running).rejects.toMatchObject({ reason: 'TRANSPORT' });
    expect(signals.get('w')?.aborted).toBe(true);
    answer('w');
    await settle();
    expect(kept).toEqual([]);
  });

  it('keeps the results that came before the failure', async () => {
    const { sandbox, answer, fail } = scriptedSandbox();
    const kept: string[] = [];
    const onResult = async (record: ToolResultRecord) => void kept.push(record.toolCallId);
    const running = executeToolCalls(sandbox, [bash('b1'), write('w', 'a.ts')], undefined, undefined, onResult, 4);
    running.catch(() => undefined);
    await settle();
    answer('w');
    await settle();
    fail('b1', new SandboxError('PROTOCOL', 'the toolbox session wrote a blank line'));
    await expect(running).rejects.toMatchObject({ reason: 'PROTOCOL' });
    expect(kept).toEqual(['w']);
  });

  it('abandons the calls still running, within the run deadline too', async () => {
    const { sandbox, signals, fail } = scriptedSandbox();
    const kept: string[] = [];
    const onResult = async (record: ToolResultRecord) => void kept.push(record.toolCallId);
    const running = withRunDeadline(60_000, (deadline) =>
      executeToolCalls(sandbox, [bash('b1'), write('w1', 'a.ts'), write('w2', 'b.ts')], undefined, deadline, onResult, 4),
    );
    running.catch(() => undefined);
    await settle();
    expect(signals.get('w1')?.aborted).toBe(false);
    fail('b1', new SandboxError('TRANSPORT', 'the toolbox exited'));
    await expect(running).rejects.toMatchObject({ reason: 'TRANSPORT' });
    expect(signals.get('w1')?.aborted).toBe(true);
    expect(signals.get('w2')?.aborted).toBe(true);
    // Abandoned, not answered TIMEOUT as a call cut off by the deadline is.
    await settle();
    expect(kept).toEqual([]);
  });

  it('a result that could not be kept fails the step the same way', async () => {
    const { sandbox, started, signals, answer } = scriptedSandbox();
    const onResult = async (record: ToolResultRecord) => {
      if (record.toolCallId === 'w') throw new Error('Redis did not answer');
    };
    const running = executeToolCalls(sandbox, [write('w', 'a.ts'), write('w2', 'a.ts'), bash('b1')], undefined, undefined, onResult, 4);
    running.catch(() => undefined);
    await settle();
    answer('w');
    await expect(running).rejects.toThrow('Redis did not answer');
    await settle();
    expect(started).toEqual(['w', 'b1']);
    expect(signals.get('b1')?.aborted).toBe(true);
  });

  it('goes on after a tool error: it is a result for the model, not a failure', async () => {
    const { sandbox, started, signals, answer } = scriptedSandbox();
    const kept: ToolResultRecord[] = [];
    const onResult = async (record: ToolResultRecord) => void kept.push(record);
    const running = executeToolCalls(sandbox, [bash('b1'), bash('b2'), write('w', 'a.ts')], undefined, undefined, onResult, 4);
    await settle();
    answer('b1', { ok: false, error: { code: 'NOT_FOUND', message: 'no such file' } });
    await settle();
    expect(signals.get('w')?.aborted).not.toBe(true);
    answer('b2');
    answer('w', { ok: true, result: { path: 'a.ts', bytes: 1 } } as never);
    const results = await running;
    expect(started).toEqual(['b1', 'w', 'b2']);
    expect(results.map((result) => [result.toolCallId, result.ok])).toEqual([
      ['b1', false],
      ['b2', true],
      ['w', true],
    ]);
    expect(results[0]?.text).toBe('NOT_FOUND: no such file');
    expect(kept.map((result) => result.toolCallId)).toEqual(['b1', 'b2', 'w']);
  });
});

const DEADLINE_TEXT =
  "TIMEOUT: the run's spec.budget.timeout passed while this call ran, so its answer was not waited for; the run ends with its partial diff";
const UNSENT_TEXT =
  "TIMEOUT: the run's spec.budget.timeout had passed before this call was sent, so it did not run; the run ends with its partial diff";
const UNSENT_AGAIN_TEXT =
  "TIMEOUT: the run's spec.budget.timeout had passed, so this call was not sent again after the run's deadline; an earlier try of this step may have run it, and what it changed is then in the partial diff; the run ends with its partial diff";

/**
 * A sandbox whose calls wait for their signal and then fail as a transport does that gave the
 * call up before writing it (its session still starting): ABORTED, written false.
 */
function unwritingSandbox() {
  const started: string[] = [];
  const sandbox: Sandbox = {
    call: (request: ToolRequest, options?: CallOptions) => {
      started.push(request.callId ?? '');
      return new Promise<ToolResponse>((_resolve, reject) =>
        options?.signal?.addEventListener(
          'abort',
          () => reject(new SandboxError('ABORTED', 'the tool call was aborted before it was sent to the toolbox', { written: false })),
          { once: true },
        ),
      );
    },
    importTree: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
  return { sandbox, started };
}

describe('executeToolCalls at the run deadline', () => {
  // The toolbox does not serialise bash: a chained call sent after the deadline ran beside the
  // one the deadline cut off, and its effects (rm -rf build) landed in the partial diff.
  it('sends none of a chain after the deadline and answers the rest TIMEOUT, saying they did not run', async () => {
    const { sandbox, started } = scriptedSandbox();
    const kept: string[] = [];
    const onResult = async (record: ToolResultRecord) => void kept.push(record.toolCallId);
    const results = await withRunDeadline(1, (deadline) =>
      executeToolCalls(sandbox, [bash('b1'), bash('b2'), bash('b3')], undefined, deadline, onResult, 4),
    );
    expect(started).toEqual(['b1']);
    expect(results.map((result) => [result.toolCallId, result.ok, result.text])).toEqual([
      ['b1', false, DEADLINE_TEXT],
      ['b2', false, UNSENT_TEXT],
      ['b3', false, UNSENT_TEXT],
    ]);
    expect(kept).toEqual(['b1', 'b2', 'b3']);
  });

  // An approval answered after the deadline, or a retry: the deadline has passed before the
  // first call of any chain is sent, not a timer's tick after.
  it('sends no call at all when the deadline passed before the step', async () => {
    const { sandbox, started } = scriptedSandbox();
    const results = await withRunDeadline(-600_000, (deadline) =>
      executeToolCalls(
        sandbox,
        [bash('b1'), bash('b2'), { toolCallId: 'w', toolName: 'write_file', input: { path: 'a', content: '' } }],
        undefined,
        deadline,
        undefined,
        4,
      ),
    );
    expect(started).toEqual([]);
    expect(results.map((result) => result.text)).toEqual([UNSENT_TEXT, UNSENT_TEXT, UNSENT_TEXT]);
  });

  // A redone step (hand-on.ts continueStep) runs the calls whose results were not kept: an
  // earlier try may have run them, so "it did not run" could be false while the partial diff
  // holds the change.
  it('tells the calls of a redone step not sent past the deadline that an earlier try may have run them', async () => {
    const { sandbox, started } = scriptedSandbox();
    const results = await withRunDeadline(-2_000, (deadline) =>
      executeToolCalls(sandbox, [write('w', 'a.ts'), bash('b1'), bash('b2')], undefined, deadline, undefined, 4, undefined, true),
    );
    expect(started).toEqual([]);
    expect(results.map((result) => result.text)).toEqual([UNSENT_AGAIN_TEXT, UNSENT_AGAIN_TEXT, UNSENT_AGAIN_TEXT]);
    expect(results.some((result) => result.text.includes('did not run'))).toBe(false);
  });

  // The transport gave it up before its request line went out (its session was still starting,
  // its turn behind an import had not come): it never reached the toolbox.
  it('answers a call the transport never wrote as not sent, not as cut off while it ran', async () => {
    const { sandbox, started } = unwritingSandbox();
    const observed: string[] = [];
    const results = await withRunDeadline(20, (deadline) =>
      executeToolCalls(sandbox, [bash('b1'), bash('b2')], (tool, outcome) => observed.push(`${tool}:${outcome}`), deadline, undefined, 4),
    );
    expect(started).toEqual(['s4:b1']);
    expect(results.map((result) => result.text)).toEqual([UNSENT_TEXT, UNSENT_TEXT]);
    expect(observed).toEqual([]);
  });

  it('answers a call of a redone step the transport never wrote as not sent again', async () => {
    const { sandbox } = unwritingSandbox();
    const record = await withRunDeadline(20, (deadline) =>
      executeToolCall(sandbox, write('w', 'a.ts'), undefined, deadline, 4, undefined, undefined, true),
    );
    expect(record.text).toBe(UNSENT_AGAIN_TEXT);
  });

  it('still says a call the transport wrote was cut off while it ran', async () => {
    const { sandbox } = scriptedSandbox();
    const record = await withRunDeadline(20, (deadline) =>
      executeToolCall(sandbox, bash('b1'), undefined, deadline, 4, undefined, undefined, true),
    );
    expect(record.text).toBe(DEADLINE_TEXT);
  });

  // resume-job.ts runs an approved call on its own: after the deadline it is not sent either.
  it('does not send a call whose deadline has already passed', async () => {
    const { sandbox, started } = scriptedSandbox();
    const record = await executeToolCall(sandbox, bash('b1'), undefined, AbortSignal.abort(), 4);
    expect(started).toEqual([]);
    expect(record).toEqual({ toolCallId: 'b1', toolName: 'bash', ok: false, text: UNSENT_TEXT });
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
