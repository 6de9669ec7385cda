// Which tool results are saved the moment their call finishes (workers/run-tool-calls.ts):
// every call that may change something, so a redone step never runs it twice; reads ride on
// the next save. Every tool is listed here, so a new tool is a decision, not a default. A step
// is saved before its calls only when one of them is saved on its own.
import { describe, expect, it } from 'vitest';
import { TOOL_NAMES } from '../../operator/src/api/index.ts';
import { savedBeforeCalls, savedOnItsOwn } from '../../operator/src/workers/run-tool-calls.ts';

const expected: Record<(typeof TOOL_NAMES)[number], boolean> = {
  read_file: false,
  grep: false,
  glob: false,
  list_files: false,
  git_diff: false,
  read_repository_instructions: false,
  write_file: true,
  edit_file: true,
  multi_edit: true,
  bash: true,
  bash_kill: true,
  // It reads a background job's output from the offset the model gives: run again, the same bytes and any new.
  bash_output: false,
};

describe('savedOnItsOwn', () => {
  it.each(TOOL_NAMES.map((tool) => [tool, expected[tool]] as const))('%s: %s', (tool, saved) => {
    expect(savedOnItsOwn(tool)).toBe(saved);
  });

  it('saves a call to a tool it does not know (the safe side)', () => {
    expect(savedOnItsOwn('a_new_tool')).toBe(true);
  });
});

describe('savedBeforeCalls', () => {
  it.each([
    ['an answer with no calls', [], false],
    ['reads only', ['read_file', 'grep', 'glob', 'bash_output'], false],
    ['a read and a write', ['read_file', 'edit_file'], true],
    ['one bash', ['bash'], true],
    ['a tool it does not know', ['read_file', 'a_new_tool'], true],
  ] as const)('%s: %s', (_what, tools, saved) => {
    expect(savedBeforeCalls(tools.map((toolName) => ({ toolName })))).toBe(saved);
  });
});
