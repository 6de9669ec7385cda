// What a foreground bash call costs when it leaves nothing behind (output-holders.ts): the holders
// of its logs are looked for only among processes started since the command, and every process's
// descriptors are read only when an earlier command's log is past the cap. Counted by the
// descriptor directories read (/proc/PID/fd), not timed: a busy machine makes any timing lie.
import { spawn } from 'node:child_process';
import type * as fs from 'node:fs';
import { mkdtempSync, readdirSync as listDirectory, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { runBash } from '../../sandbox-image/toolbox/bash-session.ts';
import { createContext } from '../../sandbox-image/toolbox/toolbox-context.ts';
import type { ToolboxContext } from '../../sandbox-image/toolbox/toolbox-context.ts';
import type { BashResult } from '../../sandbox-image/toolbox/contract/tool-results.ts';

const descriptorDirectoriesRead = vi.hoisted(() => [] as number[]);
vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof fs>();
  const readdirSync = ((directory: Parameters<typeof actual.readdirSync>[0], ...rest: unknown[]) => {
    const pid = /^\/proc\/(\d+)\/(?:task\/\d+\/)?fd$/.exec(String(directory))?.[1];
    if (pid !== undefined) descriptorDirectoriesRead.push(Number(pid));
    return (actual.readdirSync as (...args: unknown[]) => unknown)(directory, ...rest);
  }) as typeof actual.readdirSync;
  return { ...actual, readdirSync, default: { ...actual, readdirSync } };
});

const onLinux = process.platform === 'linux';
const runningPids = (): Set<number> =>
  new Set(
    listDirectory('/proc')
      .filter((name) => /^\d+$/.test(name))
      .map(Number),
  );

let scratch: string;
let context: ToolboxContext;
beforeEach(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'output-holders-'));
  context = createContext({ root: path.join(scratch, 'root'), home: path.join(scratch, 'home'), outputLogMaxBytes: 1_000 });
  descriptorDirectoriesRead.length = 0;
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

describe.skipIf(!onLinux)('outputHoldersAfter, through bash', () => {
  it('reads no descriptors of a process older than the command when it leaves nothing and no log is past the cap', async () => {
    await runBash(context, { command: 'true' });
    const before = runningPids();
    descriptorDirectoriesRead.length = 0;
    const result = await runBash(context, { command: 'true' });
    expect(result).toMatchObject({ exitCode: 0, stderr: '' });
    // Only a process started during the call (none of the command's: it left nothing) may be looked at.
    expect(descriptorDirectoriesRead.filter((pid) => before.has(pid))).toEqual([]);
  });

  it('reads every process when an earlier log is past the cap, and kills the older process writing it', async () => {
    await runBash(context, { command: 'true' });
    const earlierLog = path.join(context.home, 'out', '000000000-00000000.stdout.log');
    writeFileSync(earlierLog, '');
    // Started before the command, writing that log as an earlier command's leftover would.
    const writer = spawn('bash', ['-c', `exec 3>> '${earlierLog}'; while :; do printf '%0500d' 0 >&3; sleep 0.02; done`], {
      stdio: 'ignore',
    });
    const exited = new Promise((resolve) => writer.once('exit', resolve));
    try {
      writeFileSync(earlierLog, 'x'.repeat(2_000));
      const result = (await runBash(context, { command: 'true' })) as BashResult;
      expect(descriptorDirectoriesRead).toContain(writer.pid);
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 2_000))]);
      expect(writer.exitCode !== null || writer.signalCode !== null).toBe(true);
      expect(result.stderr).toMatch(/\d+ process(es)? an earlier command left running (was|were) stopped/);
    } finally {
      writer.kill('SIGKILL');
    }
  });
});
