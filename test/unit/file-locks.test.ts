// The toolbox's lock on a file across processes (sandbox-image/toolbox/file-locks.ts): a lock
// whose owner died is taken over, but only once it is older than a holder needs to write its
// pid. In `call` mode a holder exits right after its release; a waiter that judged the next
// holder's fresh lock by that dead pid removed it, and two edits ran at once.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { withFileLock } from '../../sandbox-image/toolbox/file-locks.ts';
import { startTicksOf } from '../../sandbox-image/toolbox/process-table.ts';
import { testTempDir } from '../support/test-temp-dir.ts';

const deadPid = () => spawnSync('true').pid!;

function lockPath(home: string, key: string): string {
  const file = path.join(home, 'locks', `${createHash('sha256').update(key).digest('hex').slice(0, 32)}.lock`);
  mkdirSync(path.dirname(file), { recursive: true });
  return file;
}

function lockOf(home: string, key: string, pid: number | string, ageSeconds: number): void {
  const file = lockPath(home, key);
  writeFileSync(file, String(pid));
  const at = Date.now() / 1000 - ageSeconds;
  utimesSync(file, at, at);
}

describe('withFileLock across processes', () => {
  it('takes over a lock its owner died holding', async () => {
    const home = testTempDir('chamvi-locks-');
    lockOf(home, '/workspace/a.txt', deadPid(), 5);
    expect(await withFileLock(home, '/workspace/a.txt', async () => 'ran')).toBe('ran');
  });

  it('leaves a fresh lock under a dead pid alone until it is old enough to be stale', async () => {
    const home = testTempDir('chamvi-locks-');
    lockOf(home, '/workspace/b.txt', deadPid(), 0);
    let ran = false;
    const edit = withFileLock(home, '/workspace/b.txt', async () => {
      ran = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(ran).toBe(false);
    await edit;
    expect(ran).toBe(true);
  });

  it('waits for a live owner', async () => {
    const home = testTempDir('chamvi-locks-');
    lockOf(home, '/workspace/c.txt', process.pid, 5);
    let ran = false;
    const edit = withFileLock(home, '/workspace/c.txt', async () => void (ran = true), { limitMs: 300, message: 'held' });
    await expect(edit).rejects.toThrow('held');
    expect(ran).toBe(false);
  });

  it('writes its pid and start time, and waits for a live owner that wrote both', async () => {
    const home = testTempDir('chamvi-locks-');
    const owner = `${process.pid} ${startTicksOf(process.pid)}`;
    const written = await withFileLock(home, '/workspace/d.txt', async () => {
      const [name] = readdirSync(path.join(home, 'locks'));
      return readFileSync(path.join(home, 'locks', name!), 'utf8');
    });
    expect(written).toBe(owner);
    lockOf(home, '/workspace/d.txt', owner, 5);
    const edit = withFileLock(home, '/workspace/d.txt', async () => 'ran', { limitMs: 300, message: 'held' });
    await expect(edit).rejects.toThrow('held');
  });

  // The owner was killed and its pid now names another process: the lock is stale all the same.
  it('takes over a lock whose pid now belongs to a process started at another time', async () => {
    const home = testTempDir('chamvi-locks-');
    lockOf(home, '/workspace/e.txt', `${process.pid} ${startTicksOf(process.pid)! + 1}`, 5);
    expect(await withFileLock(home, '/workspace/e.txt', async () => 'ran', { limitMs: 2_000, message: 'held' })).toBe('ran');
  });
});

// Code in the sandbox can write under the home. A holder only ever makes a regular file holding
// its pid; anything else at a lock's name was planted there, and is removed without being
// waited on (a FIFO) or read to its end (a symlink to /dev/zero, a file far longer than a pid).
describe('withFileLock and what code in the sandbox put at a lock name', () => {
  const planted: Record<string, (file: string) => void> = {
    'a FIFO': (file) => execFileSync('mkfifo', [file]),
    'a symlink to /dev/zero': (file) => symlinkSync('/dev/zero', file),
    'a file far longer than a pid': (file) => writeFileSync(file, `${process.pid}\n`.padEnd(1_048_576, 'x')),
  };
  for (const [what, plant] of Object.entries(planted)) {
    it(`removes ${what} and runs the work`, async () => {
      const home = testTempDir('chamvi-locks-');
      // A key per case: edits of one key are chained in the process, so one left waiting would hold up the next.
      const key = `/workspace/${what}.txt`;
      const file = lockPath(home, key);
      plant(file);
      expect(await withFileLock(home, key, async () => 'ran', { limitMs: 2_000, message: 'held' })).toBe('ran');
      expect(existsSync(file)).toBe(false);
    }, 5_000);
  }
});
