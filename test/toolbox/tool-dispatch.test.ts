// Dispatch through the bundled toolbox: a glob that does not compile (in the operator's
// spec.verify.protect, or the model's glob pattern) is a tool error for that call, never a
// toolbox that exits and takes the session, and every later call, with it.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decodeResponse, encodeRequest } from '../../sandbox-image/toolbox/contract/protocol.ts';
import { callTool, errorCodeOf, makeWorkspace, runToolbox, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
  workspace.write({ 'a.txt': 'alpha\n', 'test/a.test.js': 'test\n' });
});
afterEach(() => workspace.cleanup());

describe('dispatch: a glob that does not compile', () => {
  it('answers a call whose protect glob does not compile with INVALID_INPUT, and the serve session answers the next call', async () => {
    const lines = [
      encodeRequest({ id: 1, tool: 'write_file', input: { path: 'b.txt', content: 'b\n' }, protect: ['[z-a]'] }),
      encodeRequest({ id: 2, tool: 'read_file', input: { path: 'a.txt' }, protect: ['test/{unit'] }),
      encodeRequest({ id: 3, tool: 'read_file', input: { path: 'a.txt' }, protect: ['test/**'] }),
    ];
    const result = await runToolbox(['--root', workspace.root, '--home', workspace.home, 'serve'], lines.join(''));
    expect(result.code).toBe(0);
    const answers = result.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: number; ok: boolean; error?: { code: string; message: string } });
    const byId = new Map(answers.map((answer) => [answer.id, answer]));
    expect(byId.get(1)).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT' } });
    expect(byId.get(1)?.error?.message).toContain('spec.verify.protect is invalid (the glob "[z-a]" has the range z-a written backwards');
    expect(byId.get(2)).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT' } });
    expect(byId.get(3)).toMatchObject({ ok: true });
  });

  it('answers a one-shot call whose protect glob does not compile with INVALID_INPUT and changes nothing', async () => {
    const result = await runToolbox(
      ['--root', workspace.root, '--home', workspace.home, 'call'],
      encodeRequest({ tool: 'write_file', input: { path: 'test/a.test.js', content: 'rewritten\n' }, protect: ['[z-a]'] }),
    );
    expect(result.code).toBe(0);
    const reading = decodeResponse(result.stdout);
    expect(reading.kind === 'response' && errorCodeOf(reading.response)).toBe('INVALID_INPUT');
    expect(readFileSync(path.join(workspace.root, 'test/a.test.js'), 'utf8')).toBe('test\n');
  });

  it('answers a glob tool pattern that does not compile with INVALID_INPUT saying what to fix', async () => {
    const response = await callTool(workspace, 'glob', { pattern: 'src/[z-a].ts' });
    expect(response).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT', message: expect.stringContaining('written backwards') } });
  });
});
