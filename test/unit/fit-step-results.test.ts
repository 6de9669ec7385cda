// One step's tool results cut together to a token budget: the small ones whole, the large
// ones sharing the rest, each cut the way its kind allows and saying so.
import type { ModelMessage, ToolModelMessage, ToolResultPart } from 'ai';
import { describe, expect, it } from 'vitest';
import { boundToolResult } from '../../operator/src/agent/bound-tool-result.ts';
import { estimatePartTokens } from '../../operator/src/agent/estimate-tokens.ts';
import { fitStepResults, shareOut, stepResultTokens } from '../../operator/src/agent/fit-step-results.ts';
import { toolResultText } from '../../operator/src/agent/fit-tool-result.ts';
import { toolMessage } from '../../operator/src/workers/tool-execution.ts';
import type { ToolResultRecord } from '../../operator/src/workers/run-state.ts';

// 700 such lines are within the toolbox's READ_MAX_CHARS, as a read must be to be fitted by lines.
const line = 'export function handler(request: Request): Response { return respond(request.body); }\n';
const fileLines = Array.from({ length: 700 }, (_, index) => `${index + 1}: ${line}`);
const fullRead = (path: string) => ({
  path,
  content: fileLines.join(''),
  startLine: 1,
  endLine: 700,
  totalLines: 700,
  truncated: false,
});

const ok = (toolCallId: string, toolName: string, result: unknown): ToolResultRecord => ({
  toolCallId,
  toolName,
  ok: true,
  text: toolResultText(toolName, result),
});

function step(results: ToolResultRecord[]): ModelMessage[] {
  return [
    {
      role: 'assistant',
      content: results.map((result) => ({
        type: 'tool-call' as const,
        toolCallId: result.toolCallId,
        toolName: result.toolName,
        input: {},
      })),
    },
    toolMessage(results),
  ];
}

const parts = (messages: readonly ModelMessage[]) => (messages.at(-1) as ToolModelMessage).content as ToolResultPart[];
const textOf = (messages: readonly ModelMessage[], at: number) => (parts(messages)[at]!.output as { value: string }).value;

describe('shareOut', () => {
  it('keeps the parts under an equal share whole and splits the rest equally among the larger ones', () => {
    expect(shareOut([100, 5_000, 10, 9_000], 4_110)).toEqual([100, 2_000, 10, 2_000]);
    expect(shareOut([100, 200], 1_000)).toEqual([100, 200]);
    expect(shareOut([700, 700, 700], 0)).toEqual([0, 0, 0]);
  });
});

describe('fitStepResults', () => {
  it('cuts nine full reads together to the budget, each by whole lines with endLine saying where it stopped', () => {
    const messages = step(Array.from({ length: 9 }, (_, index) => ok(`r${index}`, 'read_file', fullRead(`src/h${index}.ts`))));
    expect(stepResultTokens(messages)).toBeGreaterThan(9 * 15_000);
    const fitted = fitStepResults(messages, 40_000);
    expect(fitted.cut).toBe(9);
    expect(stepResultTokens(fitted.messages)).toBeLessThanOrEqual(40_000);
    for (let at = 0; at < 9; at += 1) {
      const read = JSON.parse(textOf(fitted.messages, at)) as ReturnType<typeof fullRead>;
      expect(read).toMatchObject({ path: `src/h${at}.ts`, startLine: 1, totalLines: 700, truncated: true });
      expect(read.endLine).toBeGreaterThan(100);
      expect(read.content).toBe(fileLines.slice(0, read.endLine).join('').slice(0, -1));
    }
    // The assistant message and everything before the step are the same objects.
    expect(fitted.messages[0]).toBe(messages[0]);
  });

  it('leaves small results whole and gives the large one what they leave', () => {
    const messages = step([
      ok('a', 'edit_file', { path: 'a.ts', replacements: 1 }),
      ok('b', 'bash', { exitCode: 0, stdout: 'x y z '.repeat(20_000), stderr: '' }),
      { toolCallId: 'c', toolName: 'grep', ok: false, text: 'BAD_PATTERN: unbalanced parenthesis' },
    ]);
    const fitted = fitStepResults(messages, 3_000);
    expect(fitted.cut).toBe(1);
    expect(parts(fitted.messages)[0]).toBe(parts(messages)[0]);
    expect(parts(fitted.messages)[2]).toBe(parts(messages)[2]);
    expect(estimatePartTokens(parts(fitted.messages)[1])).toBeLessThanOrEqual(
      3_000 - estimatePartTokens(parts(messages)[0]) - estimatePartTokens(parts(messages)[2]),
    );
    // Not a read: head and tail, with a note that says why it was cut.
    const bash = textOf(fitted.messages, 1);
    expect(bash.startsWith('{"exitCode":0,"stdout":"x y z')).toBe(true);
    expect(bash).toMatch(/bytes omitted: the result was \d+ bytes and this step's results together had to fit the model's context window/);
  });

  it('cuts tool errors and results already cut by their own bound again, with the note', () => {
    const cutBefore = boundToolResult('q '.repeat(60_000)).text;
    const messages = step([
      { toolCallId: 'a', toolName: 'bash', ok: true, text: cutBefore },
      { toolCallId: 'b', toolName: 'write_file', ok: false, text: `INVALID: ${'w'.repeat(60_000)}` },
    ]);
    const fitted = fitStepResults(messages, 2_000);
    expect(fitted.cut).toBe(2);
    expect(stepResultTokens(fitted.messages)).toBeLessThanOrEqual(2_000);
    expect(parts(fitted.messages)[1]!.output.type).toBe('error-text');
    for (const at of [0, 1]) expect(textOf(fitted.messages, at)).toContain("this step's results together had to fit");
  });

  it('leaves the note alone when the budget holds nothing more', () => {
    const fitted = fitStepResults(step([ok('r', 'read_file', fullRead('a.ts'))]), 0);
    expect(textOf(fitted.messages, 0)).toMatch(/^\s*\[… \d+ bytes omitted: .*context window/);
  });

  it('changes nothing within the budget, or without a tool message', () => {
    const messages = step([ok('r', 'read_file', fullRead('a.ts'))]);
    expect(fitStepResults(messages, 100_000)).toEqual({ messages, cut: 0 });
    const talk: ModelMessage[] = [{ role: 'user', content: 'x'.repeat(100_000) }];
    expect(fitStepResults(talk, 10)).toEqual({ messages: talk, cut: 0 });
    expect(stepResultTokens(talk)).toBe(0);
  });

  it("cuts no older step's results: only those of the newest call, with nothing after them", () => {
    const older = step([ok('r', 'read_file', fullRead('a.ts'))]);
    const answered: ModelMessage[] = [...older, { role: 'assistant', content: 'Done.' }, { role: 'user', content: 'Verify failed.' }];
    expect(fitStepResults(answered, 100)).toEqual({ messages: answered, cut: 0 });
    expect(stepResultTokens(answered)).toBe(0);
    const called = [...answered, ...step([ok('s', 'read_file', fullRead('b.ts'))])];
    expect(fitStepResults(called, 100)).toMatchObject({ cut: 1 });
    expect(fitStepResults(called, 100).messages.slice(0, 4)).toEqual(answered);
  });

  it('does not cut an image, which costs the same whatever its size', () => {
    const image: ToolResultRecord = {
      ...ok('i', 'read_file', 'x'),
      text: 'an image',
      image: { mediaType: 'image/png', data: 'A'.repeat(500_000) },
    };
    const messages = step([image, ok('r', 'read_file', fullRead('a.ts'))]);
    const fitted = fitStepResults(messages, 4_000);
    expect(parts(fitted.messages)[0]).toBe(parts(messages)[0]);
    expect(fitted.cut).toBe(1);
  });
});
