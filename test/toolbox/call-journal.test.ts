// The call journal against what the sandbox's own code (a hostile repository, a model's bash)
// can do to it: it lives under the home, never in the workspace; names come from hashes, not
// from call ids; planted entries (another request's, a symlink, a FIFO, garbage) are not
// answered; and it stays bounded however many calls come.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { requestDigest } from '../../sandbox-image/toolbox/call-journal.ts';
import { JOURNAL_MAX_ENTRIES } from '../../sandbox-image/toolbox/contract/limits.ts';
import { callTool, makeWorkspace, openSession, resultOf, runToolbox, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
  workspace.write({ 'runs.log': '' });
  workspace.git('init', '-q');
  workspace.git('add', '.');
  workspace.git('commit', '-qm', 'start');
});
afterEach(() => workspace.cleanup());

const journal = () => path.join(workspace.home, 'journal');
const entryFor = (callId: string) => path.join(journal(), createHash('sha256').update(callId).digest('hex').slice(0, 40));
const appendRun = (mark: string) => ({ command: `echo ${mark} >> runs.log` });
const runs = () => readFileSync(path.join(workspace.root, 'runs.log'), 'utf8').split('\n').filter(Boolean);

describe('the call journal', () => {
  it('keeps entries under the home, named by hash, whatever the callId says', async () => {
    const callId = '../../workspace/planted';
    resultOf(await callTool(workspace, 'bash', appendRun('once'), { callId }));
    resultOf(await callTool(workspace, 'bash', appendRun('once'), { callId }));
    expect(runs()).toEqual(['once']);
    expect(readdirSync(journal())).toEqual([path.basename(entryFor(callId))]);
    expect(workspace.git('status', '--porcelain')).toBe(' M runs.log\n');
  });

  it('refuses a callId that is not a short string', async () => {
    const tooLong = await runToolbox(
      ['--root', workspace.root, '--home', workspace.home, 'call'],
      `${JSON.stringify({ tool: 'bash', input: appendRun('x'), callId: 'x'.repeat(257) })}\n`,
    );
    expect(tooLong).toMatchObject({ code: 2, stderr: expect.stringContaining('callId') });
    const notAString = await runToolbox(
      ['--root', workspace.root, '--home', workspace.home, 'call'],
      `${JSON.stringify({ tool: 'bash', input: appendRun('x'), callId: 7 })}\n`,
    );
    expect(notAString.code).toBe(2);
    expect(runs()).toEqual([]);
  });

  it('does not answer from planted entries: another request, garbage, a symlink, a FIFO', async () => {
    mkdirSync(journal(), { recursive: true });
    const forged = { ok: true, result: { exitCode: 0, stdout: 'forged' } };
    // A sound entry, but written for another request.
    writeFileSync(entryFor('a'), `${requestDigest('bash', appendRun('other'))}\n${JSON.stringify(forged)}\n`);
    writeFileSync(entryFor('b'), `${requestDigest('bash', appendRun('b'))}\nnot json\n`);
    writeFileSync(path.join(workspace.root, 'entry'), `${requestDigest('bash', appendRun('c'))}\n${JSON.stringify(forged)}\n`);
    symlinkSync(path.join(workspace.root, 'entry'), entryFor('c'));
    execFileSync('mkfifo', [entryFor('d')]);
    for (const mark of ['a', 'b', 'c', 'd']) {
      const answer = resultOf<{ stdout: string }>(await callTool(workspace, 'bash', appendRun(mark), { callId: mark }));
      expect(answer.stdout).toBe('');
    }
    expect(runs()).toEqual(['a', 'b', 'c', 'd']);
  });

  it('runs without a journal when its directory was replaced by a symlink into the workspace', async () => {
    mkdirSync(path.join(workspace.root, 'trap'));
    symlinkSync(path.join(workspace.root, 'trap'), journal());
    resultOf(await callTool(workspace, 'bash', appendRun('x'), { callId: 'x' }));
    resultOf(await callTool(workspace, 'bash', appendRun('x'), { callId: 'x' }));
    expect(runs()).toEqual(['x', 'x']);
    expect(readdirSync(path.join(workspace.root, 'trap'))).toEqual([]);
  });

  it(`keeps the newest ${JOURNAL_MAX_ENTRIES} calls and drops older ones`, async () => {
    const session = await openSession(workspace);
    try {
      const total = JOURNAL_MAX_ENTRIES + 20;
      for (let index = 0; index < total; index += 1) {
        const answer = await session.call({ tool: 'write_file', input: { path: 'w.txt', content: `${index}` }, callId: `w${index}` });
        expect(answer.ok).toBe(true);
      }
      expect(readdirSync(journal()).length).toBe(JOURNAL_MAX_ENTRIES);
      expect(existsSync(entryFor(`w${total - 1}`))).toBe(true);
      expect(existsSync(entryFor('w0'))).toBe(false);
    } finally {
      await session.close();
    }
  });

  it('answers a repeat that arrives while the first try still runs, once that try is done', async () => {
    const [first, second] = await Promise.all([
      callTool(workspace, 'bash', { command: 'sleep 1; echo slow >> runs.log' }, { callId: 'slow' }),
      new Promise((resolve) => setTimeout(resolve, 300)).then(() =>
        callTool(workspace, 'bash', { command: 'sleep 1; echo slow >> runs.log' }, { callId: 'slow' }),
      ),
    ]);
    expect(second).toEqual(first);
    expect(runs()).toEqual(['slow']);
  });
});
