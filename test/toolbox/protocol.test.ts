// The toolbox protocol of TOOLS.md, against the bundled file as a real process.
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { encodeFrameHeader, encodeImportRequest, IMPORT_LAST_FRAME } from '../../sandbox-image/toolbox/contract/protocol.ts';
import { makeTar } from '../support/sandbox-contract.ts';
import { makeWorkspace, runToolbox, TOOLBOX, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => workspace.cleanup());

describe('toolbox call', () => {
  it('runs with plain node from a directory without node_modules', async () => {
    const lonely = mkdtempSync(path.join(tmpdir(), 'chamvi-lonely-'));
    try {
      const copy = path.join(lonely, 'toolbox.mjs');
      copyFileSync(TOOLBOX, copy);
      expect(existsSync(path.join(lonely, 'node_modules'))).toBe(false);
      workspace.write({ 'a.txt': 'alpha\n' });
      const result = await runToolbox(
        ['--root', workspace.root, '--home', workspace.home, 'call'],
        '{"tool":"read_file","input":{"path":"a.txt"}}\n',
        { cwd: lonely, toolbox: copy },
      );
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({ ok: true, result: { content: 'alpha' } });
    } finally {
      rmSync(lonely, { recursive: true, force: true });
    }
  });

  it('answers the first line without waiting for stdin to close', async () => {
    workspace.write({ 'a.txt': 'alpha\n' });
    const result = await runToolbox(
      ['--root', workspace.root, '--home', workspace.home, 'call'],
      '{"tool":"read_file","input":{"path":"a.txt"}}\n',
      { keepStdinOpen: true },
    );
    expect(result.code).toBe(0);
    expect(result.stdout.trim().split('\n')).toHaveLength(1);
  });

  it('uses CHAMVI_WORKSPACE and CHAMVI_HOME when no flags are given', async () => {
    workspace.write({ 'env.txt': 'from env\n' });
    const result = await runToolbox(['call'], '{"tool":"read_file","input":{"path":"env.txt"}}\n', {
      env: { ...process.env, CHAMVI_WORKSPACE: workspace.root, CHAMVI_HOME: workspace.home },
    });
    expect(JSON.parse(result.stdout)).toMatchObject({ ok: true, result: { content: 'from env' } });
  });

  it('exits 0 with ok:false for a tool error', async () => {
    const result = await runToolbox(
      ['--root', workspace.root, '--home', workspace.home, 'call'],
      '{"tool":"read_file","input":{"path":"missing"}}\n',
    );
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ ok: false, error: { code: 'NOT_FOUND', message: expect.any(String) } });
  });

  it('exits non-zero with the reason on stderr when the protocol fails (bad JSON, unknown tool)', async () => {
    const args = ['--root', workspace.root, '--home', workspace.home, 'call'];
    const badJson = await runToolbox(args, '{not json\n');
    expect(badJson.code).not.toBe(0);
    expect(badJson.stdout).toBe('');
    expect(badJson.stderr).toMatch(/not valid JSON/);
    const unknown = await runToolbox(args, '{"tool":"format_disk","input":{}}\n');
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/unknown tool/);
  });

  it('rejects input that does not match the schema as INVALID_INPUT', async () => {
    const result = await runToolbox(
      ['--root', workspace.root, '--home', workspace.home, 'call'],
      '{"tool":"read_file","input":{"path":"a","limit":5000}}\n',
    );
    expect(JSON.parse(result.stdout)).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT' } });
  });
});

/** A serve process fed `input` in pieces of `piece` bytes; its answers once `expected` came (stdin then ends), and its exit code. */
function serveBytes(
  input: Buffer,
  expected: number,
  piece = 4096,
): Promise<{ answers: Array<Record<string, unknown>>; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [TOOLBOX, '--root', workspace.root, '--home', workspace.home, 'serve'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const answers: Array<Record<string, unknown>> = [];
    let buffer = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      let newline;
      while ((newline = buffer.indexOf('\n')) !== -1) {
        answers.push(JSON.parse(buffer.slice(0, newline)) as Record<string, unknown>);
        buffer = buffer.slice(newline + 1);
        if (answers.length === expected) child.stdin.end();
      }
    });
    child.stdin.on('error', () => undefined);
    child.on('error', reject);
    child.on('close', (code) => resolve({ answers, code }));
    for (let at = 0; at < input.length; at += piece) child.stdin.write(input.subarray(at, at + piece));
  });
}

describe('toolbox serve', () => {
  const serveLines = async (requests: string[], expected: number) => (await serveBytes(Buffer.from(requests.join('')), expected)).answers;

  it('answers each request with its id, in completion order', async () => {
    workspace.write({ 'a.txt': 'alpha\n' });
    const answers = await serveLines(
      ['{"id":1,"tool":"bash","input":{"command":"sleep 0.5; echo slow"}}\n', '{"id":"two","tool":"read_file","input":{"path":"a.txt"}}\n'],
      2,
    );
    expect(answers.map((answer) => answer.id)).toEqual(['two', 1]);
    expect(answers[1]).toMatchObject({ ok: true, result: { stdout: 'slow\n' } });
    // The id is the first key, so a client can route a line it will not parse whole.
    expect(Object.keys(answers[0] as object)[0]).toBe('id');
  });

  it('answers a malformed line with an error and keeps serving', async () => {
    workspace.write({ 'a.txt': 'alpha\n' });
    const answers = await serveLines(
      ['{"id":7,"tool":"nope"}\n', 'garbage\n', '{"id":8,"tool":"read_file","input":{"path":"a.txt"}}\n'],
      3,
    );
    expect(answers.find((answer) => answer.id === 7)).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT' } });
    expect(answers.find((answer) => answer.id === null)).toMatchObject({ ok: false });
    expect(answers.find((answer) => answer.id === 8)).toMatchObject({ ok: true });
  });

  it('finishes the requests in flight when stdin closes, then exits 0', async () => {
    const child = spawn(process.execPath, [TOOLBOX, '--root', workspace.root, '--home', workspace.home, 'serve'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stdin.end('{"id":1,"tool":"bash","input":{"command":"sleep 0.3; echo done"}}\n');
    const code = await new Promise((resolve) => child.on('close', resolve));
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ id: 1, ok: true, result: { stdout: 'done\n' } });
  });
});

describe('toolbox serve: a session import', () => {
  /** Frames of `size` bytes and the last frame, as contract/protocol.ts writes them. */
  function frames(archive: Buffer, size: number): Buffer {
    const parts: Buffer[] = [];
    for (let at = 0; at < archive.length; at += size) {
      const part = archive.subarray(at, at + size);
      parts.push(Buffer.from(encodeFrameHeader(part.length)), part);
    }
    return Buffer.concat([...parts, Buffer.from(IMPORT_LAST_FRAME)]);
  }

  const readA = Buffer.from('{"id":2,"tool":"read_file","input":{"path":"src/a.txt"}}\n');

  it('unpacks an archive sent in frames, answers twice under its id, and reads requests after it from the whole tree', async () => {
    const archive = makeTar([
      { name: 'src/a.txt', content: 'alpha\n' },
      { name: 'big.bin', content: 'x'.repeat(300_000) },
    ]);
    // Frames of 1000 bytes fed in pieces of 333: counts and bodies split across reads.
    const input = Buffer.concat([Buffer.from(encodeImportRequest(1, [])), frames(archive, 1000), readA]);
    const { answers, code } = await serveBytes(input, 3, 333);
    expect(code).toBe(0);
    expect(answers).toEqual([
      { id: 1, ok: true, result: { receiving: true } },
      { id: 1, ok: true, result: expect.objectContaining({ files: 2, bytes: 300_006 }) },
      { id: 2, ok: true, result: expect.objectContaining({ content: 'alpha' }) },
    ]);
  });

  it('refuses an archive with an entry outside the workspace, drops the rest of its frames, and keeps serving', async () => {
    workspace.write({ 'src/a.txt': 'kept\n' });
    const archive = makeTar([
      { name: '../escaped.txt', content: 'x' },
      { name: 'later.txt', content: 'y'.repeat(200_000) },
    ]);
    const input = Buffer.concat([Buffer.from(encodeImportRequest(1, [])), frames(archive, 512), readA]);
    const { answers, code } = await serveBytes(input, 3);
    expect(code).toBe(0);
    expect(answers[1]).toMatchObject({ id: 1, ok: false, error: { code: 'OUTSIDE_WORKSPACE' } });
    expect(answers[2]).toMatchObject({ id: 2, ok: true, result: { content: 'kept' } });
    expect(existsSync(path.join(workspace.root, '..', 'escaped.txt'))).toBe(false);
  });

  it('fails the import and ends the session (exit 2) on a frame count that is not a count: nothing after it can be told apart', async () => {
    const input = Buffer.concat([Buffer.from(encodeImportRequest(1, [])), Buffer.from('12x\nabc'), readA]);
    const { answers, code } = await serveBytes(input, 3);
    expect(code).toBe(2);
    expect(answers).toEqual([
      { id: 1, ok: true, result: { receiving: true } },
      { id: 1, ok: false, error: { code: 'INVALID_INPUT', message: expect.stringContaining('frame count') } },
    ]);
  });

  it('is a serve request only: `call` refuses it (exit 2)', async () => {
    const result = await runToolbox(['--root', workspace.root, '--home', workspace.home, 'call'], encodeImportRequest(1, []));
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('serve session');
  });
});
