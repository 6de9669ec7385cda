// takeDiff (workers/take-diff.ts) in a sandbox whose code is hostile: it runs as the take's user,
// so it can break the repository's git config, plant FIFOs and symlinks in /tmp under the names
// the take sweeps and creates, and fill /tmp. The take must neither hang, nor write through a
// planted link, nor pass off a diff that lacks the model's changes as the whole change: it takes
// it in a private repository in the model's .git instead of /tmp, or it fails as a take that
// failed (its callers keep the last snapshot, or retry finalize).
import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import type { Sandbox, ToolRequest, ToolResponse } from '../../operator/src/sandbox/sandbox.ts';
import { takeDiff } from '../../operator/src/workers/take-diff.ts';
import { plantingMktemp } from './planting-mktemp.ts';
import { makeWorkspace, openSession, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
let session: LocalSandbox | undefined;
/** What a test planted in /tmp (and its shims), removed after it. */
let planted: string[];

beforeEach(() => {
  workspace = makeWorkspace();
  workspace.write({ 'a.txt': 'one\ntwo\n', 'b.txt': 'kept\n' });
  workspace.git('init', '-q');
  workspace.git('add', '.');
  workspace.git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'init');
  // The model's change: an edit and a new file, both of which every complete diff holds.
  workspace.write({ 'a.txt': 'one\nTWO\n', 'new.txt': 'fresh\n' });
  planted = [];
});
afterEach(async () => {
  await session?.close();
  session = undefined;
  for (const entry of planted) rmSync(entry, { recursive: true, force: true });
  workspace.cleanup();
});

const expectWholeChange = (diff: string) => {
  expect(diff).toContain('-two\n+TWO\n');
  expect(diff).toContain('diff --git a/new.txt b/new.txt\nnew file mode 100644\n');
};

/** A name the take's sweep matches, planted with an mtime ten minutes old. */
const plantName = () => {
  const name = `/tmp/chamvi-diff-index.${Math.random().toString(36).slice(2, 8)}`;
  planted.push(name);
  return name;
};
const backdate = (name: string) => execFileSync('touch', ['-h', '-d', '10 minutes ago', name]);

/**
 * A command `name` first in the take's PATH: the sh script `script` (given the directory it is
 * in) in a directory removed after the test, and the environment that puts it first.
 */
const firstInPath = (name: string, script: (bin: string) => string) => {
  const bin = mkdtempSync(path.join(tmpdir(), 'chamvi-take-diff-shim-'));
  planted.push(bin);
  writeFileSync(path.join(bin, name), `#!/bin/sh\n${script(bin)}`);
  chmodSync(path.join(bin, name), 0o755);
  return { bin, env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } };
};

describe('takeDiff, with a broken repository', () => {
  // git refused every command on a config it could not read, and the take printed nothing: an
  // empty diff, taken for a run that changed no file ("Succeeded" with no changes).
  it('fails as a take that failed, naming git, when .git/config is garbage', async () => {
    writeFileSync(path.join(workspace.root, '.git/config'), '[core\n\tgarbage = = =\n\x00\x01');
    session = await openSession(workspace);
    await expect(takeDiff(session, { timeoutMs: 30_000 })).rejects.toThrow(/^taking the diff failed: git .*(config|exit)/);
  });

  it('fails as a take that failed when .git is gone, rather than take no change', async () => {
    rmSync(path.join(workspace.root, '.git'), { recursive: true });
    session = await openSession(workspace);
    await expect(takeDiff(session, { timeoutMs: 30_000 })).rejects.toThrow(/^taking the diff failed: git /);
  });
});

// git that fails on a file in the workspace, not on .git, fails the take too; its message must
// not send whoever reads it to a .git that is fine, and keeps git's words, which name the file.
describe('takeDiff, with a workspace file git cannot read', () => {
  it('fails naming the file, and not blaming .git, when a tracked file is replaced by a FIFO', async () => {
    rmSync(path.join(workspace.root, 'b.txt'));
    execFileSync('mkfifo', [path.join(workspace.root, 'b.txt')]);
    session = await openSession(workspace);
    const taking = takeDiff(session, { timeoutMs: 30_000 });
    await expect(taking).rejects.toThrow(
      /^taking the diff failed: git could not read the repository or a file in the workspace \(.*b\.txt/,
    );
    await expect(taking).rejects.not.toThrow(/\.git \(config, index or HEAD\) is broken/);
  });
});

describe('takeDiff, with a directory gone while git add read its parent', () => {
  // git warns `could not open directory 'tmpd/': No such file or directory` and exits 0 when a
  // directory a dev server or a test made and deleted goes between its listing and its open:
  // none of its files can be missing, and the take must not fail for it. A git first in the
  // toolbox's PATH (a directory outside the workspace, which the toolbox trusts) warns so on its
  // add, as git does, then runs the real git; it records that it warned, so that the test fails
  // if the take stops running it rather than passing without the warning.
  it('takes the whole change', async () => {
    const real = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
    const shim = firstInPath(
      'git',
      (bin) =>
        `case " $* " in *" add "*) echo warned >> ${bin}/warned; echo "warning: could not open directory 'tmpd/': No such file or directory" >&2;; esac\nexec ${real} "$@"\n`,
    );
    session = await openSession(workspace, shim.env);
    expectWholeChange((await takeDiff(session, { timeoutMs: 30_000 })).diff);
    expect(readFileSync(path.join(shim.bin, 'warned'), 'utf8')).toBe('warned\n');
  });
});

/** Whether this host lets the test run the take's bash as another user (root reads a mode-000 file). */
const otherUserWorks = (() => {
  try {
    execFileSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'true'], { stdio: 'ignore' });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
})();

/** What a sandbox answers for the take's bash that ran as `run`: its exit, its output, and whether it timed out. */
const answered = (run: SpawnSyncReturns<string>): Promise<ToolResponse> => {
  const result = {
    exitCode: run.status,
    timedOut: run.error !== undefined,
    stdout: run.stdout,
    stderr: run.stderr,
    stdoutTruncated: false,
    stdoutLog: '',
  };
  return Promise.resolve({ ok: true, result } as unknown as ToolResponse);
};

/**
 * A Sandbox that runs the take's bash itself as uid 65534, which owns the workspace: a sandbox's
 * user, for whom a file or directory of mode 000 is unreadable, as it is not for root.
 */
const asOtherUser = (): Sandbox => {
  execFileSync('chown', ['-R', '65534:65534', path.dirname(workspace.root)]);
  return {
    call: (request: ToolRequest) => {
      const { command } = request.input as { command: string };
      const run = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'bash', '-c', command], {
        cwd: workspace.root,
        encoding: 'utf8',
        timeout: 20_000,
        // The run's env may ask for git's words in another language: the take reads the add's.
        env: { PATH: process.env.PATH, HOME: workspace.home, LANG: 'C.UTF-8', LANGUAGE: 'de' },
      });
      return answered(run);
    },
  } as unknown as Sandbox;
};

describe.skipIf(!otherUserWorks)("takeDiff, as the sandbox's user, with a workspace it cannot read", () => {
  it('fails naming the file, and not blaming .git, when a new file is unreadable (mode 000)', async () => {
    workspace.write({ 'locked.txt': 'secret\n' });
    chmodSync(path.join(workspace.root, 'locked.txt'), 0o000);
    const taking = takeDiff(asOtherUser(), { timeoutMs: 30_000 });
    await expect(taking).rejects.toThrow(
      /^taking the diff failed: git could not read the repository or a file in the workspace \(.*locked\.txt/,
    );
    await expect(taking).rejects.not.toThrow(/\.git \(config, index or HEAD\) is broken/);
  });

  // git add warns and exits 0, and the diff leaves the directory's files out: a change taken
  // as complete that is not.
  it('fails naming the directory, rather than take a change without its files, when a directory is unreadable', async () => {
    workspace.write({ 'd/f.txt': 'x\n' });
    chmodSync(path.join(workspace.root, 'd'), 0o000);
    await expect(takeDiff(asOtherUser(), { timeoutMs: 30_000 })).rejects.toThrow(
      /^taking the diff failed: git could not read .*could not open directory 'd\/'/,
    );
  });

  it('takes the whole change as that user when it can read every file (the test is not what fails)', async () => {
    expectWholeChange((await takeDiff(asOtherUser(), { timeoutMs: 30_000 })).diff);
  });
});

describe('takeDiff, with /tmp planted by the sandbox', () => {
  it('neither follows nor hangs on a FIFO and symlinks planted at old names the sweep matches', async () => {
    const fifo = plantName();
    execFileSync('mkfifo', [fifo]);
    const toWorkspace = plantName();
    execFileSync('ln', ['-s', path.join(workspace.root, 'b.txt'), toWorkspace]);
    const toZero = plantName();
    execFileSync('ln', ['-s', '/dev/zero', toZero]);
    for (const name of [fifo, toWorkspace, toZero]) backdate(name);
    session = await openSession(workspace);
    const started = Date.now();
    expectWholeChange((await takeDiff(session, { timeoutMs: 30_000 })).diff);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(readFileSync(path.join(workspace.root, 'b.txt'), 'utf8')).toBe('kept\n');
  });

  /**
   * The take, its directory in /tmp replaced by `plant` (sh given $N) once mktemp made it: the
   * model's code, watching /tmp, did so, which no name check prevents (same user). Only the
   * first directory: the one in the model's .git is not planted. A directory sub/ is committed.
   */
  const takeWithTmpReplaced = async (plant: string) => {
    workspace.write({ 'sub/keep.txt': 'kept\n' });
    workspace.git('add', 'sub/keep.txt');
    workspace.git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'sub');
    const base = workspace.git('rev-parse', 'HEAD').trim();
    const dir = mkdtempSync(path.join(tmpdir(), 'chamvi-take-diff-shim-'));
    planted.push(dir);
    session = await openSession(workspace);
    const { sandbox, made } = plantingMktemp(session, `[ -e ${dir}/once ] || { touch ${dir}/once; ${plant}; }`, dir);
    const started = Date.now();
    const taken = await takeDiff(sandbox, { timeoutMs: 30_000 }, base);
    expect(Date.now() - started).toBeLessThan(15_000);
    for (const name of made()) planted.push(name);
    return { taken, made: made() };
  };

  // git init refuses a name that is not a directory: the take makes its repository in the
  // model's .git instead, and removes it.
  it.each([
    ['a symlink to a file in the workspace', (root: string) => `rm -rf "$N"; ln -s ${root}/b.txt "$N"`],
    ['a symlink to /dev/zero', () => 'rm -rf "$N"; ln -s /dev/zero "$N"'],
    ['a FIFO', () => 'rm -rf "$N"; mkfifo "$N"'],
  ])("writes nothing through, and takes the whole change, when the take's directory in /tmp is replaced by %s", async (_, plant) => {
    const { taken, made } = await takeWithTmpReplaced(plant(workspace.root));
    expectWholeChange(taken.diff);
    expect(readFileSync(path.join(workspace.root, 'b.txt'), 'utf8')).toBe('kept\n');
    expect(made).toHaveLength(2);
    expect(made[1]!.startsWith(path.join(workspace.root, '.git/'))).toBe(true);
    expect(existsSync(made[1]!)).toBe(false);
  });

  // git init follows a symlink to a directory: the take wrote its repository (HEAD, config,
  // index) into the workspace's sub/, left it there (the trap removes the link only), and took
  // it as new files of the run's change. take-diff.ts refuses a directory that is a link.
  it("writes nothing through, and takes the whole change, when the take's directory in /tmp is replaced by a symlink to a directory in the workspace", async () => {
    const { taken } = await takeWithTmpReplaced(`rm -rf "$N"; ln -s ${workspace.root}/sub "$N"`);
    expectWholeChange(taken.diff);
    expect(taken.diff).not.toContain('sub/');
    expect(workspace.git('status', '--porcelain', '--untracked-files=all', '--', 'sub')).toBe('');
  });
});

/**
 * Whether this host lets the test give the take's bash a /tmp of its own (a user and mount
 * namespace): the tests below run the take's command there, with git in the real workspace.
 */
const ownTmpWorks = (() => {
  try {
    execFileSync('unshare', ['-rm', 'sh', '-c', 'mount -t tmpfs tmpfs /tmp'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/**
 * A Sandbox that runs the take's bash itself, in a mount namespace whose /tmp is a new tmpfs of
 * `size` with the workspace (which the tests make under /tmp) bound back in at its path, made
 * read-only or filled by `then`: a sandbox whose model filled its 1 GiB /tmp leaves it so.
 */
const withOwnTmp = (size: string, then: string): Sandbox =>
  ({
    call: (request: ToolRequest) => {
      const { command } = request.input as { command: string };
      const setup = `cd "$1" && mount -t tmpfs -o size=${size} tmpfs /tmp && mkdir -p "$1" && mount -c --bind . "$1" && cd "$1" && ${then}`;
      const run = spawnSync('unshare', ['-rm', 'bash', '-c', `${setup} || exit 99; eval "$2"`, 'take', workspace.root, command], {
        encoding: 'utf8',
        timeout: 20_000,
      });
      return answered(run);
    },
  }) as unknown as Sandbox;

describe.skipIf(!ownTmpWorks)('takeDiff, with no room in /tmp', () => {
  it.each([
    ['read-only', '1m', 'mount -o remount,ro /tmp'],
    ['full', '8k', '{ cat /dev/zero > /tmp/fill; true; } 2>/dev/null'],
    // Room for the private repository's directory but not for the index git writes in it.
    ['all but full', '8k', 'head -c 4096 /dev/zero > /tmp/fill'],
  ])("takes the whole change in the model's .git when /tmp is %s", async (_, size, then) => {
    const taken = await takeDiff(withOwnTmp(size, then), { timeoutMs: 30_000 });
    expectWholeChange(taken.diff);
    expect(taken.truncated).toBe(false);
  });
});
