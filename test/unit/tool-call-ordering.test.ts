// orderingKey / workspaceRelativePath: the worker names a call's file the way the toolbox
// resolves it (sandbox-image/toolbox/path-guard.ts), so calls on one file share one chain.
import { describe, expect, it } from 'vitest';
import { lexicalRelative } from '../../sandbox-image/toolbox/path-guard.ts';
import type { ToolboxContext } from '../../sandbox-image/toolbox/toolbox-context.ts';
import { orderingKey, workspaceRelativePath } from '../../operator/src/workers/tool-call-ordering.ts';

const context: ToolboxContext = { root: '/workspace', realRoot: '/workspace', home: '/home/chamvi', outputLogMaxBytes: 1024 };

/** What the toolbox makes of a path: its root-relative name, or undefined when it refuses it. */
function toolboxRelative(input: string): string | undefined {
  try {
    return lexicalRelative(context, input);
  } catch {
    return undefined;
  }
}

const PATHS = [
  'a.ts',
  './a.ts',
  '/workspace/a.ts',
  '/workspace//src///a.ts',
  'src/./lib/../a.ts',
  'src/',
  '.',
  '',
  '/workspace',
  '/workspace/',
  '/workspace/..',
  '/workspace/../workspace/a.ts',
  '//workspace/a.ts',
  '/workspace2/a.ts',
  '/etc/passwd',
  '../a.ts',
  'src/../../a.ts',
  'a\0b',
  '...',
  '.../a.ts',
];

describe('workspaceRelativePath', () => {
  it.each(PATHS)('resolves %j as the toolbox does', (input) => {
    expect(workspaceRelativePath(input)).toBe(toolboxRelative(input));
  });
});

describe('orderingKey', () => {
  const key = (toolName: string, input: unknown, toolCallId = 'c1') => orderingKey({ toolCallId, toolName, input });

  it('gives every spelling of one file the same key', () => {
    const keys = ['src/a.ts', './src/a.ts', '/workspace/src/a.ts', 'src//lib/../a.ts'].map((path) => key('edit_file', { path }));
    expect(new Set(keys).size).toBe(1);
  });

  it('keeps a path the toolbox refuses apart from the file it seems to name', () => {
    expect(key('write_file', { path: '../a.ts' })).not.toBe(key('write_file', { path: 'a.ts' }));
    expect(key('write_file', { path: '/workspace2/a.ts' })).not.toBe(key('write_file', { path: 'a.ts' }));
    expect(key('write_file', { path: '/workspace2/a.ts' })).toBe(key('edit_file', { path: '/workspace2/a.ts' }));
  });

  it('puts every shell call on one chain, and a call without a path on its own', () => {
    expect(key('bash', { command: 'ls' }, 'c1')).toBe(key('bash_output', { job: 'j' }, 'c2'));
    expect(key('list_files', {}, 'c1')).not.toBe(key('list_files', {}, 'c2'));
  });
});
