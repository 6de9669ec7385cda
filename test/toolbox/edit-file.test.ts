// write_file, edit_file and multi_edit: exact matching, atomic writes, BOM and CRLF kept,
// edits of one file serialized.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { linkSync, mkdirSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import { applyEdits } from '../../sandbox-image/toolbox/edit-file.ts';
import { errorCodeOf, makeWorkspace, openSession, resultOf, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
let session: LocalSandbox;
beforeAll(async () => {
  workspace = makeWorkspace();
  session = await openSession(workspace);
});
afterAll(async () => {
  await session.close();
  workspace.cleanup();
});

const call = (tool: string, input: Record<string, unknown>) => session.call({ tool, input });
const contentOf = (name: string) => readFileSync(path.join(workspace.root, name));

describe('edit_file', () => {
  it('replaces an exact unique match', async () => {
    workspace.write({ 'a.ts': 'const a = 1;\nconst b = 2;\n' });
    expect(resultOf(await call('edit_file', { path: 'a.ts', oldString: 'b = 2', newString: 'b = 3' }))).toEqual({
      path: 'a.ts',
      replacements: 1,
    });
    expect(contentOf('a.ts').toString()).toBe('const a = 1;\nconst b = 3;\n');
  });

  it('refuses an ambiguous match with NOT_UNIQUE, and replaces all with replaceAll', async () => {
    workspace.write({ 'dup.txt': 'x x x\n' });
    expect(errorCodeOf(await call('edit_file', { path: 'dup.txt', oldString: 'x', newString: 'y' }))).toBe('NOT_UNIQUE');
    expect(contentOf('dup.txt').toString()).toBe('x x x\n');
    expect(resultOf(await call('edit_file', { path: 'dup.txt', oldString: 'x', newString: 'y', replaceAll: true }))).toMatchObject({
      replacements: 3,
    });
    expect(contentOf('dup.txt').toString()).toBe('y y y\n');
  });

  it('counts places that overlap as more than one: NOT_UNIQUE, while replaceAll replaces them left to right', () => {
    const text = 'x = 1\nx = 1\nx = 1\n';
    // `x = 1\nx = 1` starts at line 1 and at line 2.
    expect(() => applyEdits(text, [{ oldString: 'x = 1\nx = 1', newString: 'y' }])).toThrow(
      expect.objectContaining({ code: 'NOT_UNIQUE' }),
    );
    expect(applyEdits(text, [{ oldString: 'x = 1\nx = 1', newString: 'y', replaceAll: true }])).toEqual({
      text: 'y\nx = 1\n',
      replacements: 1,
    });
    // Text that repeats but where oldString starts at one place only is still unique.
    expect(applyEdits('abab', [{ oldString: 'aba', newString: 'c' }])).toEqual({ text: 'cb', replacements: 1 });
  });

  it('says NO_MATCH, NO_CHANGE, and refuses an empty oldString', async () => {
    workspace.write({ 'c.txt': 'hello\n' });
    expect(errorCodeOf(await call('edit_file', { path: 'c.txt', oldString: 'absent', newString: 'x' }))).toBe('NO_MATCH');
    expect(errorCodeOf(await call('edit_file', { path: 'c.txt', oldString: 'hello', newString: 'hello' }))).toBe('NO_CHANGE');
    expect(errorCodeOf(await call('edit_file', { path: 'c.txt', oldString: '', newString: 'x' }))).toBe('INVALID_INPUT');
    expect(errorCodeOf(await call('edit_file', { path: 'missing.txt', oldString: 'a', newString: 'b' }))).toBe('NOT_FOUND');
  });

  it('never echoes file contents in an error', async () => {
    workspace.write({ 'secret-ish.txt': 'TOKEN=abc123\n' });
    const response = await call('edit_file', { path: 'secret-ish.txt', oldString: 'TOKEN=zzz', newString: 'x' });
    expect(response.ok).toBe(false);
    expect(JSON.stringify(response)).not.toContain('abc123');
  });

  it('keeps the byte order mark and CRLF line endings of the file', async () => {
    workspace.write({ 'win.txt': Buffer.from('\uFEFFone\r\ntwo\r\nthree\r\n', 'utf8') });
    await call('edit_file', { path: 'win.txt', oldString: 'one\ntwo', newString: 'one\nTWO\nand a half' });
    expect(contentOf('win.txt')).toEqual(Buffer.from('\uFEFFone\r\nTWO\r\nand a half\r\nthree\r\n', 'utf8'));
  });

  it('serializes concurrent edits of one file so all of them apply', async () => {
    workspace.write({ 'counter.txt': Array.from({ length: 20 }, (_, index) => `slot ${index}: empty`).join('\n') + '\n' });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        call('edit_file', { path: 'counter.txt', oldString: `slot ${index}: empty`, newString: `slot ${index}: filled` }),
      ),
    );
    expect(results.every((result) => result.ok)).toBe(true);
    expect(contentOf('counter.txt').toString()).not.toContain('empty');
  });
});

describe('edit_file and multi_edit on what is not a regular file', () => {
  it('refuse FIFOs and a socket at once, and the session keeps answering reads and writes', async () => {
    // Its own session: on a toolbox that waits on the FIFOs, this one stops answering.
    const own = makeWorkspace();
    const ownSession = await openSession(own);
    const socket = createServer();
    try {
      // Four, since each blocked open used to hold one of libuv's four threads.
      for (const name of ['p1', 'p2', 'p3', 'p4']) execFileSync('mkfifo', [path.join(own.root, name)]);
      await new Promise<void>((resolve) => socket.listen(path.join(own.root, 'sock'), resolve));
      own.write({ 'after.txt': 'still here\n' });
      // A deadline per call, so a toolbox that never answers fails the test instead of hanging it.
      const ownCall = (tool: string, input: Record<string, unknown>) => ownSession.call({ tool, input }, { timeoutMs: 5_000 });
      const edit = { oldString: 'a', newString: 'b' };
      const refused = await Promise.all([
        ownCall('edit_file', { path: 'p1', ...edit }),
        ownCall('edit_file', { path: 'p2', ...edit }),
        ownCall('multi_edit', { path: 'p3', edits: [edit] }),
        ownCall('multi_edit', { path: 'p4', edits: [edit] }),
        ownCall('edit_file', { path: 'sock', ...edit }),
      ]);
      for (const response of refused) {
        expect(errorCodeOf(response)).toBe('IO_ERROR');
        expect(response.ok ? '' : response.error.message).toMatch(/not a regular file/);
      }
      expect(resultOf<{ content: string }>(await ownCall('read_file', { path: 'after.txt' })).content).toBe('still here');
      expect(resultOf(await ownCall('write_file', { path: 'written.txt', content: 'new\n' }))).toEqual({ path: 'written.txt', bytes: 4 });
    } finally {
      socket.close();
      await ownSession.close();
      own.cleanup();
    }
  }, 20_000);
});

describe('a lock name under the home that code in the sandbox replaced with a FIFO', () => {
  it('is taken over, not waited on: the edit applies and the session keeps answering', async () => {
    const own = makeWorkspace();
    const ownSession = await openSession(own);
    try {
      own.write({ 'locked.txt': 'a\n' });
      // The lock of a file is named after its real path (file-locks.ts).
      const key = realpathSync(path.join(own.root, 'locked.txt'));
      const lock = path.join(own.home, 'locks', `${createHash('sha256').update(key).digest('hex').slice(0, 32)}.lock`);
      mkdirSync(path.dirname(lock), { recursive: true });
      execFileSync('mkfifo', [lock]);
      // A deadline per call, so a toolbox that waits on the FIFO fails the test instead of hanging it.
      const ownCall = (tool: string, input: Record<string, unknown>) => ownSession.call({ tool, input }, { timeoutMs: 5_000 });
      expect(resultOf(await ownCall('edit_file', { path: 'locked.txt', oldString: 'a', newString: 'b' }))).toEqual({
        path: 'locked.txt',
        replacements: 1,
      });
      expect(readFileSync(path.join(own.root, 'locked.txt'), 'utf8')).toBe('b\n');
      expect(resultOf(await ownCall('write_file', { path: 'locked.txt', content: 'c\n' }))).toEqual({ path: 'locked.txt', bytes: 2 });
    } finally {
      await ownSession.close();
      own.cleanup();
    }
  }, 20_000);
});

describe('multi_edit', () => {
  it('applies edits in order, each to the previous result', async () => {
    workspace.write({ 'm.txt': 'alpha beta\n' });
    expect(
      resultOf(
        await call('multi_edit', {
          path: 'm.txt',
          edits: [
            { oldString: 'alpha', newString: 'gamma' },
            { oldString: 'gamma beta', newString: 'delta' },
          ],
        }),
      ),
    ).toEqual({ path: 'm.txt', edits: 2, replacements: 2 });
    expect(contentOf('m.txt').toString()).toBe('delta\n');
  });

  it('writes nothing when one edit fails', async () => {
    workspace.write({ 'n.txt': 'one two\n' });
    const response = await call('multi_edit', {
      path: 'n.txt',
      edits: [
        { oldString: 'one', newString: 'uno' },
        { oldString: 'three', newString: 'tres' },
      ],
    });
    expect(response).toMatchObject({ ok: false, error: { code: 'NO_MATCH', message: expect.stringContaining('edit 2') } });
    expect(contentOf('n.txt').toString()).toBe('one two\n');
  });

  it('treats newString literally (no $& replacement patterns)', () => {
    expect(applyEdits('price: X', [{ oldString: 'X', newString: '$& $1 $$' }]).text).toBe('price: $& $1 $$');
  });
});

describe('write_file', () => {
  it('creates missing directories and reports the byte count', async () => {
    expect(resultOf(await call('write_file', { path: 'deep/er/new.txt', content: 'héllo' }))).toEqual({
      path: 'deep/er/new.txt',
      bytes: 6,
    });
    expect(contentOf('deep/er/new.txt').toString()).toBe('héllo');
  });

  it('writes base64 content as bytes', async () => {
    const bytes = Buffer.from([0, 1, 2, 250]);
    await call('write_file', { path: 'bytes.bin', content: bytes.toString('base64'), encoding: 'base64' });
    expect(contentOf('bytes.bin')).toEqual(bytes);
    expect(errorCodeOf(await call('write_file', { path: 'bad.bin', content: '***', encoding: 'base64' }))).toBe('INVALID_INPUT');
  });

  it('replaces the file atomically: a new inode renamed into place, the mode kept, no temporary left', async () => {
    workspace.write({ 'atomic/target.sh': 'old\n' });
    const target = path.join(workspace.root, 'atomic/target.sh');
    const { chmodSync } = await import('node:fs');
    chmodSync(target, 0o755);
    // A hard link to the old inode keeps the old bytes only if the write did not happen in place.
    linkSync(target, path.join(workspace.root, 'atomic/old-inode'));
    const before = statSync(target).ino;
    await call('write_file', { path: 'atomic/target.sh', content: 'new\n' });
    expect(statSync(target).ino).not.toBe(before);
    expect(statSync(target).mode & 0o777).toBe(0o755);
    expect(contentOf('atomic/old-inode').toString()).toBe('old\n');
    expect(contentOf('atomic/target.sh').toString()).toBe('new\n');
    expect(readdirSync(path.join(workspace.root, 'atomic')).sort()).toEqual(['old-inode', 'target.sh']);
  });

  it('edits are atomic too: an edit replaces the inode', async () => {
    workspace.write({ 'atomic-edit.txt': 'before\n' });
    const target = path.join(workspace.root, 'atomic-edit.txt');
    linkSync(target, path.join(workspace.root, 'atomic-edit-old'));
    await call('edit_file', { path: 'atomic-edit.txt', oldString: 'before', newString: 'after' });
    expect(contentOf('atomic-edit-old').toString()).toBe('before\n');
  });

  it('refuses to replace a directory', async () => {
    workspace.write({ 'adir/x': '' });
    expect(errorCodeOf(await call('write_file', { path: 'adir', content: 'x' }))).toBe('IS_DIRECTORY');
  });
});
