// Every safety rule of TOOLS.md: paths resolve inside the root (checked on the real path, for
// existing and not-yet-existing targets), credential and .git paths are denied, writes never
// follow a symlink out.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import { isDeniedPath } from '../../sandbox-image/toolbox/path-guard.ts';
import { errorCodeOf, link, makeWorkspace, openSession, resultOf, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
let session: LocalSandbox;
let outside: string;
beforeAll(async () => {
  workspace = makeWorkspace();
  outside = mkdtempSync(path.join(tmpdir(), 'chamvi-outside-'));
  writeFileSync(path.join(outside, 'secret.txt'), 'outside secret\n');
  // A sibling whose name has the root as a prefix: /…/workspace2.
  mkdirSync(`${workspace.root}2`);
  writeFileSync(`${workspace.root}2/sibling.txt`, 'sibling\n');
  workspace.write({ 'inside.txt': 'inside\n', 'real-dir/file.txt': 'real\n' });
  link(outside, path.join(workspace.root, 'out-link'));
  link(path.join(outside, 'secret.txt'), path.join(workspace.root, 'secret-link.txt'));
  link(path.join(outside, 'not-yet.txt'), path.join(workspace.root, 'dangling-out.txt'));
  link('real-dir', path.join(workspace.root, 'in-link'));
  link('../../..', path.join(workspace.root, 'real-dir/up'));
  session = await openSession(workspace);
});
afterAll(async () => {
  await session.close();
  workspace.cleanup();
  rmSync(`${workspace.root}2`, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

const call = (tool: string, input: Record<string, unknown>) => session.call({ tool, input });

describe('paths outside the workspace are refused with OUTSIDE_WORKSPACE', () => {
  it.each([
    ['..', '../secret.txt'],
    ['nested ..', 'real-dir/../../secret.txt'],
    ['absolute', '/etc/passwd'],
    ['prefix sibling of the real root', `${'ROOT'}2/sibling.txt`],
    ['prefix sibling of /workspace', '/workspace2/sibling.txt'],
    ['symlink to a file outside', 'secret-link.txt'],
    ['symlinked directory outside', 'out-link/secret.txt'],
    ['symlink deeper in the path', 'real-dir/up/etc/passwd'],
  ])('%s: read_file %s', async (_, inputPath) => {
    const resolved = inputPath.replace('ROOT', workspace.root);
    expect(errorCodeOf(await call('read_file', { path: resolved }))).toBe('OUTSIDE_WORKSPACE');
  });

  it.each([
    ['through a symlinked directory, to a file that does not exist yet', 'out-link/new.txt'],
    ['through a dangling symlink pointing out', 'dangling-out.txt'],
    ['to a new directory under a symlink pointing out', 'out-link/a/b/c.txt'],
    ['..', '../new.txt'],
    ['absolute', '/tmp/chamvi-should-not-exist.txt'],
  ])('write_file %s is refused and nothing is written outside', async (_, inputPath) => {
    expect(errorCodeOf(await call('write_file', { path: inputPath, content: 'pwned' }))).toBe('OUTSIDE_WORKSPACE');
    expect(existsSync(path.join(outside, 'new.txt'))).toBe(false);
    expect(existsSync(path.join(outside, 'not-yet.txt'))).toBe(false);
    expect(existsSync(path.join(outside, 'a'))).toBe(false);
    expect(existsSync('/tmp/chamvi-should-not-exist.txt')).toBe(false);
  });

  it('edit_file through a symlink pointing out is refused and the target is unchanged', async () => {
    expect(errorCodeOf(await call('edit_file', { path: 'secret-link.txt', oldString: 'outside', newString: 'x' }))).toBe(
      'OUTSIDE_WORKSPACE',
    );
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('outside secret\n');
  });

  it('grep, glob, list_files, git_diff and bash cwd are confined too', async () => {
    for (const [tool, input] of [
      ['grep', { pattern: 'secret', path: 'out-link' }],
      ['glob', { pattern: '*', path: '../' }],
      ['list_files', { path: 'out-link' }],
      ['git_diff', { path: '/etc' }],
      ['bash', { command: 'pwd', cwd: 'out-link' }],
      ['read_repository_instructions', { paths: ['out-link/x.ts'] }],
    ] as const) {
      const response = await call(tool, input);
      expect([tool, errorCodeOf(response)]).toEqual([
        tool,
        tool === 'git_diff' ? expect.stringMatching(/OUTSIDE_WORKSPACE|INVALID_INPUT/) : 'OUTSIDE_WORKSPACE',
      ]);
    }
  });
});

describe('paths inside the workspace work', () => {
  it('accepts /workspace/ paths, the real root, and symlinks that stay inside', async () => {
    expect(resultOf(await call('read_file', { path: '/workspace/inside.txt' }))).toMatchObject({ path: 'inside.txt', content: 'inside' });
    expect(resultOf(await call('read_file', { path: `${workspace.root}/inside.txt` }))).toMatchObject({ content: 'inside' });
    expect(resultOf(await call('read_file', { path: 'in-link/file.txt' }))).toMatchObject({ path: 'real-dir/file.txt', content: 'real' });
    expect(resultOf(await call('read_file', { path: 'real-dir/../inside.txt' }))).toMatchObject({ path: 'inside.txt' });
  });
});

describe('credential files and .git internals are denied to the file tools', () => {
  it.each([
    '.git/config',
    'sub/.git/HEAD',
    '.netrc',
    'certs/server.pem',
    'tls.key',
    'id_rsa',
    'id_rsa.pub',
    '.env',
    '.env.local',
    'app/.env.production',
  ])('%s', async (denied) => {
    for (const tool of ['read_file', 'write_file', 'edit_file'] as const) {
      const input =
        tool === 'read_file'
          ? { path: denied }
          : tool === 'write_file'
            ? { path: denied, content: 'x' }
            : { path: denied, oldString: 'a', newString: 'b' };
      expect([tool, errorCodeOf(await call(tool, input))]).toEqual([tool, 'DENIED_PATH']);
    }
  });

  it('allows .env.example and .env.sample', async () => {
    expect(resultOf(await call('write_file', { path: '.env.example', content: 'A=' }))).toMatchObject({ path: '.env.example' });
    expect(resultOf(await call('write_file', { path: '.env.sample', content: 'A=' }))).toMatchObject({ path: '.env.sample' });
    expect(isDeniedPath('config/.env.example')).toBe(false);
  });

  it('denies a symlink inside the workspace that points at a denied file', async () => {
    workspace.write({ '.env': 'TOKEN=1\n' });
    link('.env', path.join(workspace.root, 'innocent.txt'));
    expect(errorCodeOf(await call('read_file', { path: 'innocent.txt' }))).toBe('DENIED_PATH');
  });

  it('still lets git_diff and list_files see the repository', async () => {
    const repo = makeWorkspace();
    const repoSession = await openSession(repo);
    try {
      repo.write({ 'a.txt': 'a\n' });
      repo.git('init', '-q');
      repo.git('add', 'a.txt');
      repo.git('commit', '-q', '-m', 'init');
      repo.write({ 'a.txt': 'b\n', '.env': 'X=1\n' });
      const diff = resultOf<{ diff: string }>(await repoSession.call({ tool: 'git_diff', input: {} }));
      expect(diff.diff).toContain('+b');
      const files = resultOf<{ files: string[] }>(await repoSession.call({ tool: 'list_files', input: {} }));
      expect(files.files).toContain('.env');
    } finally {
      await repoSession.close();
      repo.cleanup();
    }
  });
});

describe('NUL and malformed paths', () => {
  it('refuses a NUL byte in a path', async () => {
    expect(errorCodeOf(await call('read_file', { path: 'a\u0000b' }))).toBe('INVALID_INPUT');
  });
});
