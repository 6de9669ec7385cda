// The helper programs (git, rg, grep) within their deadlines when something they started holds
// their output pipes: a repository's fsmonitor hook, which git runs while it lists or diffs, and
// a grandchild that inherited stderr, which 'close' would wait for.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { streamRecords } from '../../sandbox-image/toolbox/child-process.ts';
import { forEachFile } from '../../sandbox-image/toolbox/file-listing.ts';
import { gitDiff } from '../../sandbox-image/toolbox/git-diff.ts';
import { createContext } from '../../sandbox-image/toolbox/toolbox-context.ts';
import { makeWorkspace, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => workspace.cleanup());

/** A hook that sleeps, leaving a process that holds git's stderr for longer, then says "no data". */
function setSlowFsmonitor(holdSeconds: number): void {
  const hook = path.join(workspace.root, '.git', 'slow-fsmonitor');
  writeFileSync(hook, `#!/bin/sh\nsleep ${holdSeconds * 2} </dev/null >/dev/null &\nsleep ${holdSeconds}\nexit 1\n`, { mode: 0o755 });
  workspace.git('config', 'core.fsmonitor', hook);
}

describe('streamRecords when a process the child started holds its pipes', () => {
  it('settles at the deadline after killing the child, not when the grandchild lets go', async () => {
    const begun = Date.now();
    const run = streamRecords('sh', ['-c', 'sleep 30 >/dev/null & sleep 30'], {
      cwd: workspace.root,
      separator: 0x0a,
      maxRecordBytes: 100,
      timeoutMs: 500,
      onRecord: () => true,
    });
    await expect(run).rejects.toMatchObject({ code: 'TIMEOUT' });
    expect(Date.now() - begun).toBeLessThan(5_000);
  }, 40_000);

  it('settles at the deadline when the child exited on its own but its grandchild holds stdout', async () => {
    const begun = Date.now();
    const run = streamRecords('sh', ['-c', 'echo one; sleep 30 & exit 0'], {
      cwd: workspace.root,
      separator: 0x0a,
      maxRecordBytes: 100,
      timeoutMs: 500,
      onRecord: () => true,
    });
    await expect(run).rejects.toMatchObject({ code: 'TIMEOUT' });
    expect(Date.now() - begun).toBeLessThan(5_000);
  }, 40_000);

  it('settles at once when aborted, and when the caller has seen enough', async () => {
    const stop = new AbortController();
    const begun = Date.now();
    const aborted = streamRecords('sh', ['-c', 'sleep 30 >/dev/null & sleep 30'], {
      cwd: workspace.root,
      separator: 0x0a,
      maxRecordBytes: 100,
      signal: stop.signal,
      onRecord: () => true,
    });
    setTimeout(() => stop.abort(), 200);
    expect(await aborted).toMatchObject({ stopped: true, timedOut: false });
    const enough = await streamRecords('sh', ['-c', 'echo one; echo two; sleep 30 >&2 & sleep 30'], {
      cwd: workspace.root,
      separator: 0x0a,
      maxRecordBytes: 100,
      onRecord: () => false,
    });
    expect(enough).toMatchObject({ stopped: true, timedOut: false });
    expect(Date.now() - begun).toBeLessThan(5_000);
  }, 70_000);

  it('still reads all of the output of a child that ends normally', async () => {
    const records: string[] = [];
    const outcome = await streamRecords('sh', ['-c', 'seq 1 20000; echo last-without-newline | tr -d "\\n"'], {
      cwd: workspace.root,
      separator: 0x0a,
      maxRecordBytes: 100,
      onRecord: (record) => {
        records.push(record.toString('utf8'));
        return true;
      },
    });
    expect(outcome).toMatchObject({ exitCode: 0, stopped: false, timedOut: false });
    expect(records).toHaveLength(20_001);
    expect(records.at(-1)).toBe('last-without-newline');
  });
});

describe("a repository's fsmonitor hook", () => {
  beforeEach(() => {
    workspace.write({ 'a.txt': 'one\n' });
    workspace.git('init', '-q');
    workspace.git('add', '.');
    workspace.git('commit', '-qm', 'first');
    workspace.write({ 'a.txt': 'two\n', 'b.txt': 'new\n' });
  });

  it('is not run by a listing, which answers at once within its deadline', async () => {
    setSlowFsmonitor(5);
    const context = createContext({ root: workspace.root, home: workspace.home });
    const files: string[] = [];
    const begun = Date.now();
    await forEachFile(context, '', false, (file) => files.push(file.path), { timeoutMs: 2_000 });
    expect(Date.now() - begun).toBeLessThan(2_000);
    expect(files.sort()).toEqual(['a.txt', 'b.txt']);
  }, 30_000);

  it('is not run by git_diff, which answers at once', async () => {
    setSlowFsmonitor(5);
    const context = createContext({ root: workspace.root, home: workspace.home });
    const begun = Date.now();
    const result = await gitDiff(context, {});
    expect(Date.now() - begun).toBeLessThan(3_000);
    expect(result.status).toBe(' M a.txt\n?? b.txt\n');
    expect(result.diff).toContain('+two');
  }, 30_000);
});
