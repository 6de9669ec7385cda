// The workers' child processes (workers/process-launcher.ts): one contract over both ways of
// starting them, from this process and through the launcher's helper process, with real
// /bin/sh, cat and sleep. Then what only the helper has: losing it, and closing it; and a
// run's clone, commit and archive made through it with real git and tar.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { isRepositoryAllowed } from '../../operator/src/reconcile/allow-repo.ts';
import { headRevision } from '../../operator/src/workers/apply-diff.ts';
import { cloneRepository, isCloneFailure } from '../../operator/src/workers/git-clone.ts';
import { testTempDir } from '../support/test-temp-dir.ts';
import {
  LauncherLostError,
  ProcessLauncher,
  launchHere,
  launchToEnd,
  type Launch,
  type LaunchedProcess,
  type LaunchOptions,
} from '../../operator/src/workers/process-launcher.ts';

const entry = fileURLToPath(new URL('../../operator/src/process-launcher-main.ts', import.meta.url));
// The helper is TypeScript here, as under the dev operator (node --import tsx).
const newLauncher = () => new ProcessLauncher(entry, ['--import', 'tsx']);
const launchers: ProcessLauncher[] = [];
afterAll(() => {
  for (const launcher of launchers) launcher.close();
});

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  error?: Error;
}

/** Runs to the child's close, collecting everything it said. */
function run(launch: Launch, command: string, args: string[], options: Partial<LaunchOptions> = {}, input?: string): Promise<Ended> {
  return new Promise((resolve) => {
    const child = launch(command, args, {
      cwd: options.cwd ?? tmpdir(),
      env: options.env ?? { PATH: process.env.PATH },
      stdio: options.stdio ?? [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const ended: Ended = { code: null, signal: null, stdout: '', stderr: '' };
    child.stdout?.on('data', (chunk: Buffer) => (ended.stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (ended.stderr += chunk.toString()));
    child.on('error', (error) => (ended.error = error));
    child.on('close', (code, signal) => resolve({ ...ended, code, signal }));
    if (input !== undefined) child.stdin!.end(input);
  });
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const implementations: Array<[string, () => Launch]> = [
  ['from this process', () => launchHere],
  [
    'through the helper',
    () => {
      const launcher = newLauncher();
      launchers.push(launcher);
      return launcher.launch;
    },
  ],
];

describe.each(implementations)('launching a child %s', (_name, make) => {
  const launch = make();

  it('relays stdout and stderr and the exit code', async () => {
    const ended = await run(launch, '/bin/sh', ['-c', 'printf out; printf err >&2; exit 3']);
    expect(ended).toMatchObject({ code: 3, signal: null, stdout: 'out', stderr: 'err' });
    expect(ended.error).toBeUndefined();
  });

  it('runs in the given directory with exactly the given environment', async () => {
    const dir = realpathSync(testTempDir('chamvi-launch-'));
    const ended = await run(launch, '/bin/sh', ['-c', 'pwd; echo "$ONLY:${HOME:-unset}"'], {
      cwd: dir,
      env: { PATH: process.env.PATH, ONLY: 'given' },
    });
    expect(ended.stdout).toBe(`${dir}\ngiven:unset\n`);
  });

  it('feeds stdin and returns a megabyte of output whole', async () => {
    expect((await run(launch, 'cat', [], {}, 'to cat and back')).stdout).toBe('to cat and back');
    const big = await run(launch, '/bin/sh', ['-c', 'head -c 1048576 /dev/zero | tr "\\0" x']);
    expect(big.stdout.length).toBe(1048576);
    expect(big.code).toBe(0);
  });

  it('gives no stdout stream when stdout is ignored', async () => {
    const child = launch('/bin/sh', ['-c', 'echo nobody reads this'], { cwd: tmpdir(), env: {}, stdio: ['ignore', 'ignore', 'pipe'] });
    expect(child.stdout).toBeNull();
    const code = await new Promise((resolve) => child.on('close', resolve));
    expect(code).toBe(0);
  });

  it('kills the child on request', async () => {
    const child = launch('/bin/sh', ['-c', 'echo started; exec sleep 30'], {
      cwd: tmpdir(),
      env: { PATH: process.env.PATH },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.once('data', () => child.kill('SIGKILL'));
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.on('close', (...ended) => resolve(ended)),
    );
    expect({ code, signal }).toEqual({ code: null, signal: 'SIGKILL' });
  });

  it('reports a command that does not exist as an error, with its code', async () => {
    const ended = await run(launch, 'chamvi-no-such-command', []);
    expect(ended.error).toBeInstanceOf(Error);
    expect((ended.error as NodeJS.ErrnoException).code).toBe('ENOENT');
  });

  it("launchToEnd gives the command PATH and none of the operator's environment", async () => {
    process.env.CHAMVI_TEST_OPERATOR_SECRET = 'not for tar';
    try {
      await expect(
        launchToEnd(launch, '/bin/sh', ['-c', 'test -z "$CHAMVI_TEST_OPERATOR_SECRET" && command -v tar'], tmpdir()),
      ).resolves.toBeUndefined();
      // The control: given the whole environment, a child sees it.
      expect((await run(launch, '/bin/sh', ['-c', 'printf %s "$CHAMVI_TEST_OPERATOR_SECRET"'], { env: process.env })).stdout).toBe(
        'not for tar',
      );
    } finally {
      delete process.env.CHAMVI_TEST_OPERATOR_SECRET;
    }
  });

  it('launchToEnd resolves on success and rejects with what the command said', async () => {
    await expect(launchToEnd(launch, '/bin/sh', ['-c', 'exit 0'], tmpdir())).resolves.toBeUndefined();
    await expect(launchToEnd(launch, '/bin/sh', ['-c', 'echo "no such file" >&2; exit 2'], tmpdir())).rejects.toThrow(
      '/bin/sh failed: no such file',
    );
  });
});

describe('the launcher helper', () => {
  it('fails a running child with LauncherLostError when the helper dies, and starts a new helper for the next one', async () => {
    const launcher = newLauncher();
    launchers.push(launcher);
    const running = run(launcher.launch, '/bin/sh', ['-c', 'echo started; exec sleep 30']);
    await until(() => launcher.helperPid !== undefined, 'the helper');
    const first = launcher.helperPid!;
    // Started: the helper has the child.
    await new Promise((resolve) => setTimeout(resolve, 500));
    process.kill(first, 'SIGKILL');
    const ended = await running;
    expect(LauncherLostError.isInstance(ended.error)).toBe(true);
    expect(ended.error!.message).toContain('SIGKILL');
    const next = await run(launcher.launch, '/bin/sh', ['-c', 'echo again']);
    expect(next).toMatchObject({ code: 0, stdout: 'again\n' });
    expect(launcher.helperPid).not.toBe(first);
  });

  it('survives a launch sent to a helper that died a moment ago: that launch fails with LauncherLostError, the next starts a new helper', async () => {
    // Nothing may reach the process as an error nobody heard: in the operator that is exit 1.
    const unheard: unknown[] = [];
    const hear = (error: unknown) => unheard.push(error);
    process.on('uncaughtException', hear);
    onTestFinished(() => void process.off('uncaughtException', hear));
    const launcher = newLauncher();
    launchers.push(launcher);
    await run(launcher.launch, 'true', []);
    const first = launcher.helperPid!;
    process.kill(first, 'SIGKILL');
    // Waited for without yielding: the helper is gone, and this loop has not read its channel's
    // end, so the launch's message is written to a dead pipe. The kernel closes the helper's end
    // a moment after it shows as a zombie.
    const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
    const deadline = Date.now() + 10_000;
    while (alive(first) && !isZombie(first) && Date.now() < deadline) pause(10);
    pause(200);
    const lost = await run(launcher.launch, 'true', []);
    expect(LauncherLostError.isInstance(lost.error)).toBe(true);
    const next = await run(launcher.launch, '/bin/sh', ['-c', 'echo again']);
    expect(next).toMatchObject({ code: 0, stdout: 'again\n' });
    expect(launcher.helperPid).not.toBe(first);
    expect(unheard).toEqual([]);
  });

  it('fails a launch whose fork of the helper threw (ENOMEM, E2BIG) with LauncherLostError instead of throwing, and forks again for the next', async () => {
    // fork() throws all but EACCES, EAGAIN, EMFILE, ENFILE and ENOENT itself. ENOMEM needs the
    // memory gone; E2BIG, an argument over the kernel's 128 KiB for one, is thrown the same way.
    const execArgv = ['--import', 'tsx', `--title=${'x'.repeat(200_000)}`];
    const launcher = new ProcessLauncher(entry, execArgv);
    launchers.push(launcher);
    const lost = await run(launcher.launch, '/bin/sh', ['-c', 'echo ran']);
    expect(LauncherLostError.isInstance(lost.error)).toBe(true);
    expect(lost.error!.message).toContain('spawn E2BIG');
    expect(lost).toMatchObject({ code: null, stdout: '' });
    expect(launcher.helperPid).toBeUndefined();
    execArgv.pop(); // the launcher forks with these arguments as they are now
    const next = await run(launcher.launch, '/bin/sh', ['-c', 'echo again']);
    expect(next).toMatchObject({ code: 0, stdout: 'again\n' });
  });

  it('relays every byte, in order, of a child that writes far faster than the operator reads (the helper holds it back, output-relay.ts)', async () => {
    const launcher = newLauncher();
    launchers.push(launcher);
    // 32 MiB of numbered blocks, which cat writes faster than the operator's side takes them.
    const blocks = Buffer.alloc(32 * 1024 * 1024);
    for (let at = 0; at < blocks.length; at += 8) blocks.writeBigUInt64BE(BigInt(at), at);
    const file = path.join(testTempDir('launcher-output-'), 'blocks');
    writeFileSync(file, blocks);
    const child = launcher.launch('cat', [file], { cwd: tmpdir(), env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] });
    const hash = createHash('sha256');
    let bytes = 0;
    child.stdout!.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      hash.update(chunk);
    });
    const code = await new Promise((resolve) => child.on('close', resolve));
    const expected = createHash('sha256').update(blocks).digest('hex');
    expect({ code, bytes, digest: hash.digest('hex') }).toEqual({ code: 0, bytes: blocks.length, digest: expected });
  });

  it("holds none of the operator's environment itself", async () => {
    process.env.CHAMVI_TEST_OPERATOR_SECRET = 'not for the helper';
    const launcher = newLauncher();
    launchers.push(launcher);
    try {
      await run(launcher.launch, 'true', []);
      const environ = readFileSync(`/proc/${launcher.helperPid!}/environ`, 'utf8');
      expect(environ).toContain('PATH=');
      expect(environ).not.toContain('CHAMVI_TEST_OPERATOR_SECRET');
    } finally {
      delete process.env.CHAMVI_TEST_OPERATOR_SECRET;
    }
  });

  it('takes every child it runs down with it when closed', async () => {
    const launcher = newLauncher();
    const child = launcher.launch('/bin/sh', ['-c', 'echo $$; exec sleep 30'], {
      cwd: tmpdir(),
      env: { PATH: process.env.PATH },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.on('error', () => undefined);
    const pid = await new Promise<number>((resolve) => child.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString()))));
    const helper = launcher.helperPid!;
    expect(alive(pid)).toBe(true);
    launcher.close();
    await until(() => !alive(helper), 'the helper to exit');
    await until(() => !alive(pid) || isZombie(pid), 'its child to be killed');
    expect(() => launcher.launch('true', [], { cwd: tmpdir(), env: {}, stdio: ['ignore', 'ignore', 'pipe'] })).toThrow('closed');
  });
});

/** A killed child whose parent (the helper) is gone may linger as a zombie until init reaps it. */
function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

describe('the clone through the launcher', () => {
  const source = () => {
    const dir = testTempDir('chamvi-launch-repo-');
    const git = (...args: string[]) => execFileSync('git', ['-c', 'user.email=t@chamvi.dev', '-c', 'user.name=t', ...args], { cwd: dir });
    git('init', '-q', '-b', 'main');
    writeFileSync(path.join(dir, 'README.md'), 'through the helper\n');
    git('add', '.');
    git('commit', '-qm', 'one');
    return { dir, head: execFileSync('git', ['rev-parse', 'HEAD'], { cwd: dir }).toString().trim() };
  };
  const url = (dir: string) => {
    const decision = isRepositoryAllowed(`file://${dir}`, ['file:///**']);
    if (!decision.allowed) throw new Error(decision.message);
    return decision.url;
  };

  it('clones, names the commit and archives the tree with the helper starting git and tar', async () => {
    const launcher = newLauncher();
    launchers.push(launcher);
    const repo = source();
    const dir = await cloneRepository({ url: url(repo.dir), maxCheckoutBytes: 1 << 20, maxCheckoutFiles: 100, launch: launcher.launch });
    onTestFinished(() => rmSync(path.dirname(dir), { recursive: true, force: true }));
    expect(readFileSync(path.join(dir, 'README.md'), 'utf8')).toBe('through the helper\n');
    expect(await headRevision(dir, launcher.launch)).toBe(repo.head);
    const archive = path.join(path.dirname(dir), 'workspace.tar');
    await launchToEnd(launcher.launch, 'tar', ['-C', dir, '-cf', archive, '.'], dir);
    expect(execFileSync('tar', ['-tf', archive]).toString()).toContain('./README.md');
  });

  it('fails a clone whose launcher was lost with that error, which the job retries, not with CloneFailed', async () => {
    // A launcher that loses every child at once.
    const losing: Launch = () => {
      const child = Object.assign(new EventEmitter(), { stdin: null, stdout: null, stderr: new PassThrough(), kill: () => false });
      setImmediate(() => child.emit('error', new LauncherLostError('the process launcher exited (SIGKILL) while the child ran')));
      return child as unknown as LaunchedProcess;
    };
    const repo = source();
    const failure = await cloneRepository({ url: url(repo.dir), maxCheckoutBytes: 1 << 20, maxCheckoutFiles: 100, launch: losing }).catch(
      (error: unknown) => error,
    );
    expect(LauncherLostError.isInstance(failure)).toBe(true);
    expect(isCloneFailure(failure)).toBe(false);
  });
});
