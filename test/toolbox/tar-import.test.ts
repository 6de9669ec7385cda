// `toolbox import`: a tar stream on stdin becomes the workspace; entries that would land
// outside the root are refused.
import { execFileSync, spawn } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  mkdirSync,
  closeSync,
  lstatSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEntryFile } from '../../sandbox-image/toolbox/tar-import.ts';
import { ToolboxError } from '../../sandbox-image/toolbox/toolbox-error.ts';
import { makeTar, type TarEntry } from '../support/sandbox-contract.ts';
import { makeWorkspace, runToolbox, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => workspace.cleanup());

async function importTar(tar: Buffer) {
  const result = await runToolbox(['--root', workspace.root, 'import'], tar);
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as { ok: boolean; result?: Record<string, number>; error?: { code: string; message: string } };
}

describe('import', () => {
  it('extracts a tar made by tar(1), including long names, modes, symlinks and .git', async () => {
    const source = mkdtempSync(path.join(tmpdir(), 'chamvi-source-'));
    try {
      const longName = `${'deep/'.repeat(30)}file-with-a-long-name.txt`;
      mkdirSync(path.join(source, path.dirname(longName)), { recursive: true });
      writeFileSync(path.join(source, longName), 'long\n');
      writeFileSync(path.join(source, 'run.sh'), '#!/bin/sh\n', { mode: 0o755 });
      execFileSync('git', ['init', '-q'], { cwd: source });
      execFileSync('ln', ['-s', 'run.sh', 'alias.sh'], { cwd: source });
      const tar = execFileSync('tar', ['-cf', '-', '-C', source, '.'], { maxBuffer: 64 * 1024 * 1024 });
      const response = await importTar(tar);
      expect(response).toMatchObject({ ok: true, result: { files: expect.any(Number), symlinks: 1 } });
      expect(readFileSync(path.join(workspace.root, longName), 'utf8')).toBe('long\n');
      expect(statSync(path.join(workspace.root, 'run.sh')).mode & 0o111).not.toBe(0);
      expect(readlinkSync(path.join(workspace.root, 'alias.sh'))).toBe('run.sh');
      expect(existsSync(path.join(workspace.root, '.git/HEAD'))).toBe(true);
    } finally {
      rmSync(source, { recursive: true, force: true });
    }
  });

  it.each(['pax', 'ustar', 'gnu'])('reads the %s format of tar(1), and git archive output', async (format) => {
    const source = mkdtempSync(path.join(tmpdir(), 'chamvi-source-'));
    try {
      const name = format === 'ustar' ? 'dir/ünïcode.txt' : `dir/${'n'.repeat(150)}/ünïcode.txt`;
      mkdirSync(path.join(source, path.dirname(name)), { recursive: true });
      writeFileSync(path.join(source, name), 'content\n');
      const tar = execFileSync('tar', [`--format=${format}`, '-cf', '-', '-C', source, 'dir']);
      expect((await importTar(tar)).ok).toBe(true);
      expect(readFileSync(path.join(workspace.root, name), 'utf8')).toBe('content\n');
      execFileSync('git', ['init', '-q'], { cwd: source });
      execFileSync('git', ['add', '.'], { cwd: source });
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'x'], { cwd: source });
      const archive = execFileSync('git', ['archive', '--prefix=archived/', 'HEAD'], { cwd: source });
      expect((await importTar(archive)).ok).toBe(true);
      expect(readFileSync(path.join(workspace.root, 'archived', name), 'utf8')).toBe('content\n');
    } finally {
      rmSync(source, { recursive: true, force: true });
    }
  });

  it.each(['gnu', 'pax'])('keeps names that are not UTF-8 byte for byte (%s format of tar(1))', async (format) => {
    const source = mkdtempSync(path.join(tmpdir(), 'chamvi-source-'));
    const bytes = (name: string) => Buffer.from(name, 'latin1');
    const at = (root: string, name: string) => Buffer.concat([Buffer.from(`${root}/`), bytes(name)]);
    try {
      writeFileSync(at(source, 'a\xff.txt'), 'ff\n');
      writeFileSync(at(source, 'a\xfe.txt'), 'fe\n');
      mkdirSync(at(source, 'd\xff'));
      writeFileSync(at(source, 'd\xff/inner\xfd.txt'), 'inner\n');
      symlinkSync(bytes('a\xff.txt'), at(source, 'l\xfd'));
      const tar = execFileSync('tar', [`--format=${format}`, '-cf', '-', '-C', source, '.']);
      const response = await importTar(tar);
      expect(response).toMatchObject({ ok: true, result: { files: 3, symlinks: 1 } });
      const names = readdirSync(workspace.root, { encoding: 'buffer' }).map((name) => name.toString('latin1'));
      expect(names.sort()).toEqual(['a\xfe.txt', 'a\xff.txt', 'd\xff', 'l\xfd']);
      expect(readFileSync(at(workspace.root, 'a\xff.txt'), 'utf8')).toBe('ff\n');
      expect(readFileSync(at(workspace.root, 'a\xfe.txt'), 'utf8')).toBe('fe\n');
      expect(readFileSync(at(workspace.root, 'd\xff/inner\xfd.txt'), 'utf8')).toBe('inner\n');
      expect(readlinkSync(at(workspace.root, 'l\xfd'), { encoding: 'buffer' }).toString('latin1')).toBe('a\xff.txt');
    } finally {
      rmSync(source, { recursive: true, force: true });
    }
  });

  it('refuses a file written through a symlink out of the workspace whose name is not UTF-8', async () => {
    const base = mkdtempSync(path.join(tmpdir(), 'chamvi-source-'));
    const at = (root: string, name: string) => Buffer.concat([Buffer.from(`${root}/`), Buffer.from(name, 'latin1')]);
    try {
      for (const directory of ['links', 'files', 'outside']) mkdirSync(path.join(base, directory));
      symlinkSync(path.join(base, 'outside'), at(path.join(base, 'links'), 's\xff'));
      mkdirSync(at(path.join(base, 'files'), 's\xff'));
      writeFileSync(at(path.join(base, 'files'), 's\xff/escaped.txt'), 'x');
      const archive = path.join(base, 'both.tar');
      execFileSync('tar', ['-cf', archive, '-C', path.join(base, 'links'), '.']);
      execFileSync('tar', ['-rf', archive, '-C', path.join(base, 'files'), '.']);
      const response = await importTar(readFileSync(archive));
      expect(response).toMatchObject({ ok: false, error: { code: 'OUTSIDE_WORKSPACE' } });
      expect(readdirSync(path.join(base, 'outside'))).toEqual([]);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it('accepts a gzip-compressed stream', async () => {
    const response = await importTar(gzipSync(makeTar([{ name: 'z.txt', content: 'zipped' }])));
    expect(response.ok).toBe(true);
    expect(readFileSync(path.join(workspace.root, 'z.txt'), 'utf8')).toBe('zipped');
  });

  it.each<[string, TarEntry[]]>([
    ['a .. entry', [{ name: '../escape.txt', content: 'x' }]],
    ['a nested .. entry', [{ name: 'a/../../escape.txt', content: 'x' }]],
    ['an absolute entry', [{ name: '/tmp/chamvi-import-escape.txt', content: 'x' }]],
    [
      'a file written through a symlink the archive created',
      [
        { name: 'link', type: 'symlink', target: 'OUTSIDE' },
        { name: 'link/escape.txt', content: 'x' },
      ],
    ],
    ['a hard link to a file outside', [{ name: 'hard', type: 'hardlink', target: '../../etc/passwd' }]],
    [
      // The import remembers the parents it resolved: an entry that replaces one must undo that.
      'a file written through a directory the archive replaced with a symlink',
      [
        { name: 'a/', type: 'directory' },
        { name: 'a/first.txt', content: 'x' },
        { name: 'a', type: 'symlink', target: 'OUTSIDE' },
        { name: 'a/escape.txt', content: 'x' },
      ],
    ],
    [
      'a file written through a replaced directory under another name (a symlink inside the workspace)',
      [
        { name: 'a/b/first.txt', content: 'x' },
        { name: 'alias', type: 'symlink', target: 'a/b' },
        { name: 'alias/second.txt', content: 'x' },
        { name: 'a', type: 'symlink', target: 'OUTSIDE' },
        { name: 'alias/escape.txt', content: 'x' },
      ],
    ],
  ])('refuses %s with OUTSIDE_WORKSPACE and writes nothing outside', async (_, entries) => {
    const outside = mkdtempSync(path.join(tmpdir(), 'chamvi-outside-'));
    try {
      const resolved = entries.map((entry) => ('target' in entry ? { ...entry, target: entry.target.replace('OUTSIDE', outside) } : entry));
      const response = await importTar(makeTar(resolved));
      expect(response).toMatchObject({ ok: false, error: { code: 'OUTSIDE_WORKSPACE' } });
      expect(existsSync(path.join(outside, 'escape.txt'))).toBe(false);
      expect(existsSync(path.join(path.dirname(workspace.root), 'escape.txt'))).toBe(false);
      expect(existsSync('/tmp/chamvi-import-escape.txt')).toBe(false);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('replaces an existing symlink instead of writing through it', async () => {
    const outside = mkdtempSync(path.join(tmpdir(), 'chamvi-outside-'));
    try {
      writeFileSync(path.join(outside, 'target.txt'), 'original');
      const response = await importTar(
        makeTar([
          { name: 'file.txt', type: 'symlink', target: path.join(outside, 'target.txt') },
          { name: 'file.txt', content: 'replaced' },
        ]),
      );
      expect(response.ok).toBe(true);
      expect(readFileSync(path.join(outside, 'target.txt'), 'utf8')).toBe('original');
      expect(readFileSync(path.join(workspace.root, 'file.txt'), 'utf8')).toBe('replaced');
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('refuses a stream that is not tar', async () => {
    const response = await importTar(Buffer.alloc(1024, 0x41));
    expect(response).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT' } });
  });
});

// Between removing what stood at an entry's path and creating the entry's file, a process still
// running in the workspace can put something there. Nothing in the import yields in between, so
// the race is played by calling the create step on a path that is already taken.
describe('the file an import creates, when something took its path after the remove step', () => {
  it('a FIFO: the import fails with IO_ERROR at once, not waiting for a reader', () => {
    const fifo = path.join(workspace.root, 'pipe');
    execFileSync('mkfifo', [fifo]);
    // The main thread would wait on the FIFO for good: a reader comes after a second, so a
    // create that waits makes the test fail instead of hanging it.
    const rescuer = spawn('sh', ['-c', 'sleep 1; exec cat "$0" > /dev/null', fifo], { stdio: 'ignore' });
    try {
      const started = Date.now();
      let thrown: unknown;
      try {
        closeSync(createEntryFile(fifo, 0o644, 'pipe'));
      } catch (error) {
        thrown = error;
      }
      expect(Date.now() - started).toBeLessThan(500);
      expect(ToolboxError.isInstance(thrown) && thrown.code).toBe('IO_ERROR');
      expect((thrown as Error).message).toMatch(/tar entry pipe .*during the import/);
      expect(lstatSync(fifo).isFIFO()).toBe(true);
    } finally {
      rescuer.kill('SIGKILL');
    }
  });

  it('a symlink: the import fails with IO_ERROR, and nothing is written through it', () => {
    const outside = mkdtempSync(path.join(tmpdir(), 'chamvi-outside-'));
    try {
      const target = path.join(outside, 'target.txt');
      writeFileSync(target, 'original');
      symlinkSync(target, path.join(workspace.root, 'file.txt'));
      expect(() => closeSync(createEntryFile(path.join(workspace.root, 'file.txt'), 0o644, 'file.txt'))).toThrow(
        expect.objectContaining({ code: 'IO_ERROR' }),
      );
      expect(readFileSync(target, 'utf8')).toBe('original');
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('a free path: a new regular file with the entry mode', () => {
    const file = path.join(workspace.root, 'run.sh');
    closeSync(createEntryFile(file, 0o755, 'run.sh'));
    expect(lstatSync(file).isFile()).toBe(true);
    expect(statSync(file).mode & 0o100).toBe(0o100);
  });
});
