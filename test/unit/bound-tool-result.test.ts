import { describe, expect, it } from 'vitest';
import { boundToolResult, TOOL_RESULT_LIMIT_BYTES } from '../../operator/src/agent/bound-tool-result.ts';

describe('boundToolResult', () => {
  it('leaves a result within 64 KiB untouched', () => {
    const text = 'x'.repeat(TOOL_RESULT_LIMIT_BYTES);
    expect(boundToolResult(text)).toEqual({ text, truncated: false, originalBytes: TOOL_RESULT_LIMIT_BYTES });
  });

  it('cuts a larger one to 64 KiB keeping head and tail, with a note saying what to do', () => {
    const text = `HEAD${'a'.repeat(200_000)}TAIL`;
    const bounded = boundToolResult(text);
    expect(bounded.truncated).toBe(true);
    expect(bounded.originalBytes).toBe(200_008);
    expect(Buffer.byteLength(bounded.text, 'utf8')).toBeLessThanOrEqual(TOOL_RESULT_LIMIT_BYTES);
    expect(bounded.text.startsWith('HEAD')).toBe(true);
    expect(bounded.text.endsWith('TAIL')).toBe(true);
    expect(bounded.text).toMatch(/bytes omitted: the result was 200008 bytes.*read a line range/);
  });

  it('never splits a multi-byte character', () => {
    const bounded = boundToolResult('é€😀'.repeat(20_000), 1_000);
    expect(Buffer.byteLength(bounded.text, 'utf8')).toBeLessThanOrEqual(1_000);
    expect(bounded.text).not.toContain('\uFFFD');
  });

  it('states how many bytes were omitted, consistently with what was kept', () => {
    const text = 'Q'.repeat(10_000);
    const bounded = boundToolResult(text, 2_000);
    const omitted = Number(/(\d+) bytes omitted/.exec(bounded.text)?.[1]);
    const kept = bounded.text.split('').filter((character) => character === 'Q').length;
    expect(kept + omitted).toBe(10_000);
  });
});
