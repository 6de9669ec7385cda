// workers/git-runner.ts with real git and /bin/sh: the one runner every worker starts git with
// holds it to the memory limit (and what it starts), says so in the one message when git runs
// out, stops it at its timeout, keeps only the end of its output, and stops it when asked.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitOutOfMemoryError, runGit, type GitCommand } from '../../operator/src/workers/git-runner.ts';
import { GitNotStartedError } from '../../operator/src/workers/errors/git-not-started-error.ts';
import { LauncherLostError, launchHere, ProcessLauncher, type Launch } from '../../operator/src/workers/process-launcher.ts';
import { createRepository, git } from '../support/git-fixture.ts';

const MiB = 1024 * 1024;
let base: string;
let repo: string;
/** A commit whose message is 40 MiB: git reads it whole wherever it reads it. */
let largeCommit: string;

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), 'chamvi-git-runner-'));
  repo = join(base, 'repo');
  createRepository(repo, { 'README.md': 'Hello\n' });
  const message = join(base, 'message');
  writeFileSync(message, `${'0'.repeat(40 * MiB)}\n`);
  largeCommit = git(['commit-tree', '-F', message, 'HEAD^{tree}'], repo).trim();
});
const launchers: ProcessLauncher[] = [];
afterAll(() => {
  for (const launcher of launchers) launcher.close();
  rmSync(base, { recursive: true, force: true });
});

/** The launcher helper's launch, as the operator starts git (the helper is TypeScript here, as under the dev operator). */
function helperLaunch(...execArgv: string[]): Launch {
  const launcher = new ProcessLauncher(fileURLToPath(new URL('../../operator/src/process-launcher-main.ts', import.meta.url)), [
    '--import',
    'tsx',
    ...execArgv,
  ]);
  launchers.push(launcher);
  return launcher.launch;
}

/** git in the test repository with the machine's config left out. */
const command = (args: string[], more: Partial<GitCommand> = {}): GitCommand => ({
  launch: launchHere,
  cwd: repo,
  env: { PATH: process.env.PATH, HOME: '/nonexistent', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  args,
  memoryBytes: 64 * MiB,
  timeoutMs: 30_000,
  stdoutTailBytes: 4096,
  ...more,
});

describe('runGit', () => {
  it('holds git to the memory limit: a 40 MiB commit read whole fails under 24 MiB, saying so, and is read under 128 MiB', async () => {
    const failure = await runGit(command(['cat-file', 'commit', largeCommit], { memoryBytes: 24 * MiB })).catch((error: unknown) => error);
    expect(GitOutOfMemoryError.isInstance(failure)).toBe(true);
    expect((failure as GitOutOfMemoryError).message).toBe(
      'git cat-file needed more than the 24.0 MiB (25165824 bytes) of memory each git the operator runs may have',
    );
    expect(failure).toMatchObject({ label: 'cat-file', limitBytes: 24 * MiB });
    const read = await runGit(command(['cat-file', 'commit', largeCommit], { memoryBytes: 128 * MiB, stdoutTailBytes: 10 }));
    expect(read).toMatchObject({ code: 0, stdout: '000000000\n', timedOut: false, stopped: false });
  });

  it('holds what git starts to the same limit, with the config that keeps a real repository under it', async () => {
    const exit = await runGit(
      command(['-c', 'alias.limits=!ulimit -d; git config core.bigFileThreshold; git config pack.threads', 'limits'], {
        memoryBytes: 48 * MiB,
      }),
    );
    expect(exit).toMatchObject({ code: 0, stdout: `${48 * 1024}\n16m\n1\n` });
  });

  it('names git in the message by its label, or by its command after the -c settings', async () => {
    const limit = { memoryBytes: 24 * MiB };
    await expect(runGit(command(['-c', 'core.quotePath=false', 'cat-file', 'commit', largeCommit], limit))).rejects.toThrow(
      /^git cat-file needed/,
    );
    await expect(runGit(command(['cat-file', 'commit', largeCommit], { ...limit, label: 'clone' }))).rejects.toThrow(/^git clone needed/);
  });

  it('kills a git that outlives its timeout, with what it started, and says it timed out', async () => {
    const started = Date.now();
    const exit = await runGit(command(['-c', 'alias.hang=!sleep 30', 'hang'], { timeoutMs: 300 }));
    expect(exit).toMatchObject({ timedOut: true, signal: 'SIGKILL', stopped: false });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('keeps only the end of what git prints, on stdout and stderr', async () => {
    const noisy = '!i=0; while [ $i -lt 2000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done; echo last >&2; exit 3';
    const exit = await runGit(command(['-c', `alias.noisy=${noisy}`, 'noisy'], { stdoutTailBytes: 20 }));
    expect(exit.code).toBe(3);
    expect(exit.stdout).toBe('out 1997\nout 1998\nout 1999\n'.slice(-20));
    expect(exit.stderr.endsWith('err 1999\nlast\n')).toBe(true);
    expect(exit.stderr.length).toBeLessThanOrEqual(8000);
    expect(exit.stderr.length).toBeGreaterThan(4000);
  });

  it('gives git its input, and stops it when onStdout says so', async () => {
    const echoed = await runGit(command(['hash-object', '--stdin'], { input: 'Hello\n' }));
    expect(echoed.stdout.trim()).toBe(git(['rev-parse', 'HEAD:README.md'], repo).trim());
    let chunks = 0;
    const exit = await runGit(
      command(['-c', 'alias.endless=!yes', 'endless'], { stdoutTailBytes: undefined, onStdout: () => ++chunks < 3 }),
    );
    expect(exit).toMatchObject({ stopped: true, timedOut: false });
    expect(chunks).toBe(3);
  });

  it("does not take a remote's out-of-memory for git's own", async () => {
    const remote = '!echo "remote: fatal: Out of memory, malloc failed" >&2; exit 128';
    await expect(runGit(command(['-c', `alias.remote-said=${remote}`, 'remote-said']))).resolves.toMatchObject({ code: 128 });
    const own = '!echo "fatal: Out of memory, malloc failed" >&2; exit 128';
    await expect(runGit(command(['-c', `alias.own=${own}`, 'own']))).rejects.toThrow(GitOutOfMemoryError);
  });

  it('rejects with GitNotStartedError and its code when git does not start, and throws at once what launch throws', async () => {
    const missing = await runGit(command(['status'], { cwd: join(base, 'no such directory') })).catch((error: unknown) => error);
    expect(GitNotStartedError.isInstance(missing)).toBe(true);
    expect((missing as GitNotStartedError).code).toBe('ENOENT');
    expect((missing as Error).message).toBe('git status could not start (ENOENT)');
    const closed: Launch = () => {
      throw new Error('the process launcher is closed');
    };
    expect(() => runGit(command(['status'], { launch: closed }))).toThrow('the process launcher is closed');
  });

  it('rejects with LauncherLostError, which the job retries, when the helper could not be forked (ENOMEM, E2BIG)', async () => {
    // fork() throws ENOMEM itself, as it does E2BIG (an argument over the kernel's 128 KiB for one).
    const unforkable = helperLaunch(`--title=${'x'.repeat(200_000)}`);
    const lost = await Promise.resolve()
      .then(() => runGit(command(['status'], { launch: unforkable })))
      .catch((error: unknown) => error);
    expect(LauncherLostError.isInstance(lost)).toBe(true);
    expect((lost as Error).message).toContain('spawn E2BIG');
  });

  it.each([
    ['from this process', () => launchHere],
    ['through the launcher helper', () => helperLaunch()],
  ])('names only the code when node refuses the environment %s (a NUL in a value): never the value', async (_, make) => {
    const canary = 'CANARY-KEY-MATERIAL-0d2e';
    const refused = await Promise.resolve()
      .then(() =>
        runGit(command(['status'], { launch: make(), env: { PATH: process.env.PATH, CHAMVI_GIT_TOKEN: `PKCS12-ish\0${canary}` } })),
      )
      .catch((error: unknown) => error);
    expect(GitNotStartedError.isInstance(refused)).toBe(true);
    expect((refused as Error).message).toBe('git status could not start (ERR_INVALID_ARG_VALUE)');
    expect(JSON.stringify(refused, Object.getOwnPropertyNames(refused))).not.toContain(canary);
  });
});
