// A default read_file of a long file, through the real toolbox and the worker's result path:
// what the model reads ends on a whole line, says where (endLine, truncated), and reading on
// from endLine + 1 continues without a gap or an overlap, up to the last line.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TOOL_RESULT_LIMIT_BYTES } from '../../operator/src/agent/bound-tool-result.ts';
import { executeToolCall } from '../../operator/src/workers/tool-execution.ts';
import type { ReadFileTextResult } from '../../sandbox-image/toolbox/contract/tool-results.ts';
import { makeWorkspace, openSession, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => workspace.cleanup());

// 2 000 lines of 30 characters, a third of them two-byte: under read_file's 65 536 characters,
// over the 64 KiB the worker hands the model.
const LINES = Array.from({ length: 2_000 }, (_, index) => `line ${index + 1} "quoted" `.padEnd(30, 'é'));

describe('a read over the tool result bound', () => {
  it('reaches the model as whole lines with truthful metadata, and reads on without a gap', async () => {
    workspace.write({ 'long.txt': `${LINES.join('\n')}\n` });
    const session = await openSession(workspace);
    try {
      const seen: string[] = [];
      let offset = 1;
      for (let reads = 0; reads < 10 && seen.length < LINES.length; reads += 1) {
        const call = { toolCallId: `read-${reads}`, toolName: 'read_file', input: { path: 'long.txt', offset } };
        const record = await executeToolCall(session, call);
        expect(Buffer.byteLength(record.text)).toBeLessThanOrEqual(TOOL_RESULT_LIMIT_BYTES);
        const read = JSON.parse(record.text) as ReadFileTextResult;
        const kept = read.content.split('\n');
        expect(read.startLine).toBe(offset);
        expect(read.endLine).toBe(offset + kept.length - 1);
        expect(read.truncated).toBe(read.endLine < LINES.length);
        seen.push(...kept);
        offset = read.endLine + 1;
      }
      expect(seen).toEqual(LINES);
    } finally {
      await session.close();
    }
  });
});
