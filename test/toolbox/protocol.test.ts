// The toolbox protocol of TOOLS.md, against the bundled file as a real process.
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
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

describe('toolbox serve', () => {
  function serveLines(requests: string[], expected: number): Promise<Array<Record<string, unknown>>> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [TOOLBOX, '--root', workspace.root, '--home', workspace.home, 'serve'], {
        stdio: ['pipe', 'pipe', 'inherit'],
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
      child.on('error', reject);
      child.on('close', () => resolve(answers));
      child.stdin.write(requests.join(''));
    });
  }

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
