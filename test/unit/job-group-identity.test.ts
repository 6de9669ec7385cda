// The identity of a job's process as job-group-identity.ts reads it from /proc: the command name
// is the one field code in the sandbox chooses, so a name that looks like more fields must not
// move the group, session or start time read after it.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { processIdentityOf } from '../../sandbox-image/toolbox/job-group-identity.ts';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const commOf = (pid: number) => readFileSync(`/proc/${pid}/comm`, 'utf8').replace(/\n$/, '');

describe.skipIf(process.platform !== 'linux')('processIdentityOf', () => {
  it('reads the session and start time of a process whose command name holds `) 1 2 3 (`', async () => {
    // A session leader of its own (detached: setsid), as a job's wrapper is; it renames itself
    // (a builtin's redirection, so /proc/self is the shell) once told to on stdin.
    const child = spawn('bash', ['-c', 'read -r; printf "%s" "x) 1 2 3 (y" > /proc/self/comm; echo renamed; read -r'], {
      detached: true,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.push(child);
    const pid = child.pid!;
    for (let attempt = 0; attempt < 100 && commOf(pid) !== 'bash'; attempt += 1) await sleep(20);
    const before = processIdentityOf(pid);
    expect(before).toEqual({ pgid: pid, session: pid, startTicks: expect.any(Number) });

    const renamed = new Promise((resolve) => child.stdout.once('data', resolve));
    child.stdin.write('\n');
    await renamed;
    expect(commOf(pid)).toBe('x) 1 2 3 (y');
    expect(processIdentityOf(pid)).toEqual(before);
  });

  it('is undefined for a pid nothing has', () => {
    // Above the largest pid_max Linux allows (2^22).
    expect(processIdentityOf(4_194_305)).toBeUndefined();
  });
});
