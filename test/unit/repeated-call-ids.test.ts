// Which of a step's tool calls reuse an id an earlier call of the step has (workers/run-tool-calls.ts):
// those are answered with a tool error instead of running, decided from the saved calls alone.
import { describe, expect, it } from 'vitest';
import { repeatedCallIds, repeatedIdResult } from '../../operator/src/workers/repeated-call-ids.ts';

const call = (toolCallId: string, toolName = 'read_file') => ({ toolCallId, toolName, input: { path: 'a.txt' } });
const result = (toolCallId: string) => ({ toolCallId, toolName: 'bash', ok: true, text: 'exit 0' });

describe('repeatedCallIds', () => {
  it.each([
    ['distinct ids', ['a', 'b', 'c'], [], []],
    ['the second and third of one id', ['t', 'u', 't', 't'], [], [2, 3]],
    // A resumed approval: the approved call and those before it are in `earlier`.
    ['an id an earlier result of the step has', ['a', 'b'], ['b', 'x'], [1]],
    ['an id repeated both ways', ['x', 'x'], ['x'], [0, 1]],
  ] as const)('%s', (_what, ids, earlier, repeated) => {
    expect([
      ...repeatedCallIds(
        ids.map((id) => call(id)),
        earlier.map(result),
      ),
    ]).toEqual(repeated);
  });
});

describe('repeatedIdResult', () => {
  it('is a tool error for that call, naming the id and saying it did not run', () => {
    expect(repeatedIdResult(call('t', 'write_file'))).toEqual({
      toolCallId: 't',
      toolName: 'write_file',
      ok: false,
      text: expect.stringMatching(/^DUPLICATE_TOOL_CALL_ID: an earlier tool call of this step has the id "t", so this one did not run/),
    });
  });

  it('cuts a long id to 80 characters', () => {
    const text = repeatedIdResult(call('i'.repeat(10_000))).text;
    expect(text).toContain(`"${'i'.repeat(80)}…"`);
    expect(text.length).toBeLessThan(400);
  });
});
