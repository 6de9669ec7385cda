// A toolbox line is written by whatever can reach the toolbox's stdout, in the sandbox too. One
// nested deeper than any answer of the contract parses (JSON.parse does not recurse) but blows
// the stack of what reads the result next (fit-tool-result.ts's JSON.stringify): a RangeError,
// which is no SandboxError and retried the step into AgentFailed. It is refused as PROTOCOL.
import { describe, expect, it } from 'vitest';
import { RESPONSE_MAX_JSON_DEPTH, parseResponseLine } from '../../operator/src/sandbox/response-lines.ts';
import { ServeSession } from '../../operator/src/sandbox/serve-session.ts';
import { UnfinishedLineBudget } from '../../operator/src/sandbox/unfinished-line-budget.ts';
import { executeToolCall } from '../../operator/src/workers/tool-execution.ts';
import { scriptedToolbox } from '../support/scripted-toolbox.ts';

/** An answer whose `result.matches` nests `depth` arrays: the line is `depth + 2` deep. */
const nested = (depth: number) => `{"id":1,"ok":true,"result":{"matches":${'['.repeat(depth)}${']'.repeat(depth)}}}`;

describe('parseResponseLine and nesting', () => {
  it('refuses a 120 KB line nested 60 000 deep as PROTOCOL, before anything recurses into it', () => {
    const line = nested(60_000);
    expect(line.length).toBeGreaterThan(120_000);
    expect(() => parseResponseLine(line)).toThrow(
      expect.objectContaining({ name: 'SandboxError', reason: 'PROTOCOL', message: expect.stringContaining('nested more than') as string }),
    );
  });

  it(`takes a line nested exactly ${RESPONSE_MAX_JSON_DEPTH} deep and refuses one a level deeper`, () => {
    expect(parseResponseLine(nested(RESPONSE_MAX_JSON_DEPTH - 2)).id).toBe(1);
    expect(() => parseResponseLine(nested(RESPONSE_MAX_JSON_DEPTH - 1))).toThrow(expect.objectContaining({ reason: 'PROTOCOL' }));
  });

  it('counts brackets inside strings as text, not nesting', () => {
    const line = `{"id":2,"ok":true,"result":{"content":"${'['.repeat(10_000)}"}}`;
    expect(parseResponseLine(line).response).toEqual({ ok: true, result: { content: '['.repeat(10_000) } });
  });

  it('makes a tool call answered with a deep line fail with a SandboxError the step handles, and ends the session', async () => {
    const toolbox = scriptedToolbox((request, stdout) => stdout.write(`${nested(60_000).replace('"id":1', `"id":${request.id}`)}\n`));
    const session = new ServeSession(toolbox.process, {
      maxResponseBytes: 8 * 1_048_576,
      defaultTimeoutMs: 60_000,
      unfinishedLines: new UnfinishedLineBudget(64 * 1_048_576),
    });
    const sandbox = { call: (request: Parameters<ServeSession['call']>[0]) => session.call(request) };
    await expect(
      executeToolCall(sandbox as never, { toolCallId: 't', toolName: 'grep', input: { pattern: 'x' } } as never),
    ).rejects.toMatchObject({ name: 'SandboxError', reason: 'PROTOCOL' });
    expect(session.alive).toBe(false);
    expect(toolbox.killed).toBe(true);
  });
});
