// agent/files-touched.ts: which files the agent read and changed, taken from its calls and their
// results. A result belongs to the call it follows in the step, not to every call of its id: one
// answer may hold two calls of one id (the second is answered DUPLICATE_TOOL_CALL_ID and does
// not run, workers/run-tool-calls.ts), and a later answer may use the id again.
import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { collectFilesTouched } from '../../operator/src/agent/files-touched.ts';

type Call = { toolName: string; path: string };

/** One step: the model's answer calling each tool with the same id, then the results in call order. */
function stepWithOneId(id: string, calls: Call[], ok: boolean[]): ModelMessage[] {
  return [
    {
      role: 'assistant',
      content: calls.map((call) => ({ type: 'tool-call' as const, toolCallId: id, toolName: call.toolName, input: { path: call.path } })),
    },
    {
      role: 'tool',
      content: calls.map((call, index) => ({
        type: 'tool-result' as const,
        toolCallId: id,
        toolName: call.toolName,
        output: ok[index] ? { type: 'text' as const, value: '{}' } : { type: 'error-text' as const, value: 'DUPLICATE_TOOL_CALL_ID: …' },
      })),
    },
  ];
}

describe('collectFilesTouched with calls that share an id', () => {
  it('counts the call of one answer that ran and not the one answered with a tool error, whichever comes first', () => {
    const writeThenRead = stepWithOneId(
      't',
      [
        { toolName: 'write_file', path: 'dup.txt' },
        { toolName: 'read_file', path: 'other.txt' },
      ],
      [true, false],
    );
    expect(collectFilesTouched(writeThenRead)).toEqual({ read: [], changed: ['dup.txt'] });
    const readThenWrite = stepWithOneId(
      't',
      [
        { toolName: 'read_file', path: 'other.txt' },
        { toolName: 'write_file', path: 'dup.txt' },
      ],
      [true, false],
    );
    expect(collectFilesTouched(readThenWrite)).toEqual({ read: ['other.txt'], changed: [] });
  });

  it('takes an id used again in a later answer as another call: each counts by its own result', () => {
    const failedThenDone = [
      ...stepWithOneId('call_0', [{ toolName: 'edit_file', path: 'a.ts' }], [false]),
      ...stepWithOneId('call_0', [{ toolName: 'edit_file', path: 'b.ts' }], [true]),
    ];
    expect(collectFilesTouched(failedThenDone)).toEqual({ read: [], changed: ['b.ts'] });
    const doneThenFailed = [
      ...stepWithOneId('call_0', [{ toolName: 'write_file', path: 'a.ts' }], [true]),
      ...stepWithOneId('call_0', [{ toolName: 'write_file', path: 'b.ts' }], [false]),
    ];
    expect(collectFilesTouched(doneThenFailed, { read: ['kept.md'], changed: [] })).toEqual({ read: ['kept.md'], changed: ['a.ts'] });
  });
});
