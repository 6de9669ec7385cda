// read_file behaviour: windows, continuation, limits, images, base64, binary, BOM and CRLF.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import { READ_MAX_CHARS, READ_MAX_LINES } from '../../sandbox-image/toolbox/contract/limits.ts';
import { textWindow } from '../../sandbox-image/toolbox/read-file.ts';
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

const read = (input: Record<string, unknown>) => session.call({ tool: 'read_file', input });
const numbered = (count: number) => Array.from({ length: count }, (_, index) => `line ${index + 1}`).join('\n') + '\n';

describe('read_file text windows', () => {
  it('returns at most 2000 lines, 1-based and inclusive, and continues at endLine + 1 without gap or overlap', async () => {
    workspace.write({ 'long.txt': numbered(4500) });
    const seen: string[] = [];
    let offset = 1;
    for (;;) {
      const window = resultOf<{ content: string; startLine: number; endLine: number; totalLines: number; truncated: boolean }>(
        await read({ path: 'long.txt', offset }),
      );
      expect(window.startLine).toBe(offset);
      expect(window.endLine - window.startLine + 1).toBeLessThanOrEqual(READ_MAX_LINES);
      expect(window.totalLines).toBe(4500);
      seen.push(...window.content.split('\n'));
      if (!window.truncated) break;
      offset = window.endLine + 1;
    }
    expect(seen).toEqual(numbered(4500).trimEnd().split('\n'));
  });

  it('honours offset and limit', async () => {
    workspace.write({ 'ten.txt': numbered(10) });
    expect(resultOf(await read({ path: 'ten.txt', offset: 4, limit: 3 }))).toMatchObject({
      content: 'line 4\nline 5\nline 6',
      startLine: 4,
      endLine: 6,
      truncated: true,
    });
    expect(errorCodeOf(await read({ path: 'ten.txt', offset: 11 }))).toBe('INVALID_INPUT');
  });

  it('ends a window at the last whole line within 65 536 characters', async () => {
    const line = 'x'.repeat(999);
    workspace.write({ 'wide.txt': `${line}\n`.repeat(100) });
    const window = resultOf<{ content: string; endLine: number; truncated: boolean }>(await read({ path: 'wide.txt' }));
    expect(window.content.length).toBeLessThanOrEqual(READ_MAX_CHARS);
    expect(window.endLine).toBe(65); // 65 lines of 1000 characters fit, the 66th would not
    expect(window.content.split('\n').every((piece) => piece === line)).toBe(true);
    expect(window.truncated).toBe(true);
  });

  it('cuts only a single line longer than the limit', () => {
    const window = textWindow(`${'y'.repeat(70_000)}\nnext\n`, 1, 2000);
    expect(window).toMatchObject({ startLine: 1, endLine: 1, totalLines: 2, truncated: true });
    expect(window.content).toHaveLength(READ_MAX_CHARS);
  });

  it('reads an empty file as zero lines', async () => {
    workspace.write({ 'empty.txt': '' });
    expect(resultOf(await read({ path: 'empty.txt' }))).toMatchObject({ content: '', totalLines: 0, truncated: false });
  });

  it('strips the byte order mark and shows CRLF as LF', async () => {
    workspace.write({ 'bom.txt': Buffer.from('\uFEFFfirst\r\nsecond\r\n', 'utf8') });
    expect(resultOf(await read({ path: 'bom.txt' }))).toMatchObject({ content: 'first\nsecond', totalLines: 2 });
  });

  it('refuses text files over 16 MiB', async () => {
    workspace.write({ 'huge.txt': Buffer.alloc(16 * 1_048_576 + 1, 0x61) });
    expect(errorCodeOf(await read({ path: 'huge.txt' }))).toBe('TOO_LARGE');
  });

  it('reads a 16 MiB text file', async () => {
    workspace.write({ 'big.txt': Buffer.alloc(16 * 1_048_576, 0x0a) });
    expect(resultOf(await read({ path: 'big.txt', limit: 1 }))).toMatchObject({ totalLines: 16 * 1_048_576, endLine: 1 });
  });
});

describe('read_file non-text', () => {
  it('refuses binary and non-UTF-8 files with BINARY', async () => {
    workspace.write({ 'nul.bin': Buffer.from([0x61, 0x00, 0x62]), 'latin1.txt': Buffer.from([0x63, 0x61, 0x66, 0xe9]) });
    expect(errorCodeOf(await read({ path: 'nul.bin' }))).toBe('BINARY');
    expect(errorCodeOf(await read({ path: 'latin1.txt' }))).toBe('BINARY');
  });

  it('returns raw bytes as base64 up to 1 MiB', async () => {
    const bytes = Buffer.from([0, 1, 2, 255]);
    workspace.write({ 'raw.bin': bytes, 'toolarge.bin': Buffer.alloc(1_048_577) });
    expect(resultOf(await read({ path: 'raw.bin', encoding: 'base64' }))).toEqual({
      path: 'raw.bin',
      encoding: 'base64',
      content: bytes.toString('base64'),
      bytes: 4,
    });
    expect(errorCodeOf(await read({ path: 'toolarge.bin', encoding: 'base64' }))).toBe('TOO_LARGE');
  });

  it.each([
    ['image.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]), 'image/png'],
    ['image.jpg', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]), 'image/jpeg'],
    ['image.gif', Buffer.from('GIF89a\x01\x00\x01\x00', 'latin1'), 'image/gif'],
    ['image.webp', Buffer.concat([Buffer.from('RIFF'), Buffer.from([4, 0, 0, 0]), Buffer.from('WEBPVP8 ')]), 'image/webp'],
  ])('returns %s as an image with its media type', async (name, bytes, mediaType) => {
    workspace.write({ [name]: bytes });
    const image = resultOf<Record<string, unknown>>(await read({ path: name }));
    expect(image).toEqual({ path: name, type: 'image', mediaType, bytes: bytes.length, content: bytes.toString('base64') });
    expect(image).not.toHaveProperty('instructions');
  });

  it('refuses images over 5 MiB', async () => {
    const png = Buffer.alloc(5 * 1_048_576 + 1);
    Buffer.from([0x89, 0x50, 0x4e, 0x47]).copy(png);
    workspace.write({ 'large.png': png });
    expect(errorCodeOf(await read({ path: 'large.png' }))).toBe('TOO_LARGE');
  });

  it('says IS_DIRECTORY for a directory and NOT_FOUND for a missing file', async () => {
    workspace.write({ 'dir/file.txt': 'x' });
    expect(errorCodeOf(await read({ path: 'dir' }))).toBe('IS_DIRECTORY');
    expect(errorCodeOf(await read({ path: 'dir/missing.txt' }))).toBe('NOT_FOUND');
  });

  it('refuses a FIFO at once instead of waiting for a writer, and the session keeps answering', async () => {
    execFileSync('mkfifo', [path.join(workspace.root, 'pipe')]);
    workspace.write({ 'after.txt': 'still here\n' });
    // Several, since each blocked open used to hold one of libuv's four threads.
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const response = await read({ path: 'pipe' });
      expect(errorCodeOf(response)).toBe('IO_ERROR');
      expect(response.ok ? '' : response.error.message).toMatch(/not a regular file/);
    }
    expect(resultOf<{ content: string }>(await read({ path: 'after.txt' })).content).toBe('still here');
  }, 10_000);
});
