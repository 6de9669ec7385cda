// git_diff: status and unified diff of the working tree or the index, limited to a path.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { callTool, errorCodeOf, makeWorkspace, resultOf, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
  workspace.write({ 'a.txt': 'one\n', 'dir/b.txt': 'two\n' });
  workspace.git('init', '-q');
  workspace.git('add', '.');
  workspace.git('commit', '-q', '-m', 'init');
});
afterEach(() => workspace.cleanup());

type Diff = { status: string; diff: string; truncated: boolean };

describe('git_diff', () => {
  it('shows git status --short and the working-tree diff', async () => {
    workspace.write({ 'a.txt': 'one changed\n', 'new.txt': 'new\n' });
    const result = resultOf<Diff>(await callTool(workspace, 'git_diff', {}));
    expect(result.status).toBe(' M a.txt\n?? new.txt\n');
    expect(result.diff).toContain('-one\n+one changed');
    expect(result.truncated).toBe(false);
  });

  it('shows the staged diff with staged', async () => {
    workspace.write({ 'a.txt': 'staged\n', 'dir/b.txt': 'unstaged\n' });
    workspace.git('add', 'a.txt');
    const staged = resultOf<Diff>(await callTool(workspace, 'git_diff', { staged: true }));
    expect(staged.diff).toContain('+staged');
    expect(staged.diff).not.toContain('unstaged');
    const unstaged = resultOf<Diff>(await callTool(workspace, 'git_diff', {}));
    expect(unstaged.diff).toContain('+unstaged');
    expect(unstaged.diff).not.toContain('+staged');
  });

  it('limits status and diff to a path, read literally (no pathspec magic)', async () => {
    workspace.write({ 'a.txt': 'x\n', 'dir/b.txt': 'y\n' });
    const result = resultOf<Diff>(await callTool(workspace, 'git_diff', { path: 'dir' }));
    expect(result.status).toBe(' M dir/b.txt\n');
    expect(result.diff).not.toContain('a.txt');
    const magic = resultOf<Diff>(await callTool(workspace, 'git_diff', { path: ':!dir' }));
    expect(magic).toEqual({ status: '', diff: '', truncated: false });
  });

  it('bounds the diff', async () => {
    workspace.write({ 'a.txt': 'z'.repeat(100).concat('\n').repeat(2_000) });
    const result = resultOf<Diff>(await callTool(workspace, 'git_diff', {}));
    expect(result.truncated).toBe(true);
    expect(result.diff.length).toBeLessThanOrEqual(65_536);
  });

  it('says INVALID_INPUT outside a repository', async () => {
    const plain = makeWorkspace();
    try {
      expect(errorCodeOf(await callTool(plain, 'git_diff', {}))).toBe('INVALID_INPUT');
    } finally {
      plain.cleanup();
    }
  });
});
