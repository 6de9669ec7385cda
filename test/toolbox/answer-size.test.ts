// list_files, glob and grep keep their answer's entries within RESULT_ENTRIES_MAX_BYTES and say
// truncated, so a tree of long, escape-heavy names cannot make an answer the operator refuses.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESULT_ENTRIES_MAX_BYTES } from '../../sandbox-image/toolbox/contract/limits.ts';
import type { FileListResult, GrepResult } from '../../sandbox-image/toolbox/contract/tool-results.ts';
import { callTool, makeWorkspace, resultOf, type Workspace } from './toolbox-fixture.ts';

const FILES = 150;
// 15 directories of 250 control characters: each path is ~3,770 bytes, ~22.6 KB as JSON.
const deep = Array.from({ length: 15 }, () => '\x01'.repeat(250)).join('/');
const names = Array.from({ length: FILES }, (_, index) => `${deep}/f${String(index).padStart(3, '0')}`);

let workspace: Workspace;
beforeAll(() => {
  workspace = makeWorkspace();
  mkdirSync(path.join(workspace.root, deep), { recursive: true });
  for (const name of names) writeFileSync(path.join(workspace.root, name), 'needle\n');
});
afterAll(() => workspace.cleanup());

const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

describe('answers of long listings', () => {
  it.each([
    ['list_files', { limit: 5_000 }],
    ['glob', { pattern: '**/f*', limit: 5_000 }],
  ])('%s stops within the byte cap, keeps the sorted head and says truncated', async (tool, input) => {
    const result = resultOf<FileListResult>(await callTool(workspace, tool, input));
    expect(result.truncated).toBe(true);
    expect(jsonBytes(result.files)).toBeLessThanOrEqual(RESULT_ENTRIES_MAX_BYTES);
    expect(result.files.length).toBeGreaterThan(0);
    expect(result.files).toEqual(names.slice(0, result.files.length));
  });

  it('grep stops within the byte cap, keeps the sorted head and says truncated', async () => {
    const result = resultOf<GrepResult>(await callTool(workspace, 'grep', { pattern: 'needle', limit: 500 }));
    expect(result.truncated).toBe(true);
    expect(jsonBytes(result.matches)).toBeLessThanOrEqual(RESULT_ENTRIES_MAX_BYTES);
    expect(result.matches.length).toBeGreaterThan(0);
    expect(result.matches.map((match) => match.path)).toEqual(names.slice(0, result.matches.length));
  });
});
