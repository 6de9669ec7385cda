// takeDiff (workers/take-diff.ts) against git state the model controls: the diff the operator
// keeps and publishes must be the workspace's files against the commit the run cloned, whatever
// the model did to .git (its index, config, hooks, replace refs, objects), so that what the verify
// check graded (the files) is what finalize keeps. And the commands the operator runs before any
// approval (the take, prepare's import check) must not let the run's HOME or GIT_* choose
// anything for their git, whatever environment the toolbox runs them in.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { REASONS } from '../../operator/src/api/index.ts';
import type { LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import type { Sandbox, ToolRequest } from '../../operator/src/sandbox/sandbox.ts';
import { DiffBaseMissingError } from '../../operator/src/workers/errors/diff-base-missing-error.ts';
import { IMPORT_CHECK } from '../../operator/src/workers/prepare-job.ts';
import { takeDiff } from '../../operator/src/workers/take-diff.ts';
import { plantingMktemp as plantInto } from './planting-mktemp.ts';
import { makeWorkspace, openSession, resultOf, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
let session: LocalSandbox | undefined;
/** A directory outside the workspace for markers and shadows, removed after each test. */
let outside: string;
/** The commit the run cloned. */
let base: string;

const GOOD = 'export const add = (a, b) => a + b;\n';
/** The same length as GOOD: stat data forged for one matches the other. */
const EVIL = 'export const add = (a, b) => a - b;\n';

beforeEach(() => {
  workspace = makeWorkspace();
  outside = mkdtempSync(path.join(tmpdir(), 'chamvi-take-diff-git-state-'));
  workspace.write({ 'add.js': 'export const add = () => 0;\n', 'b.txt': 'kept\n' });
  workspace.git('init', '-q');
  workspace.git('add', '.');
  workspace.git('commit', '-q', '-m', 'init');
  base = workspace.git('rev-parse', 'HEAD').trim();
});
afterEach(async () => {
  await session?.close();
  session = undefined;
  workspace.cleanup();
  rmSync(outside, { recursive: true, force: true });
});

const take = async (at: string | undefined = base) => {
  session = await openSession(workspace);
  return (await takeDiff(session, { timeoutMs: 30_000 }, at)).diff;
};

/** The diff shows the worktree's add.js (GOOD), not the blob the model staged (EVIL). */
const expectWorktreeFile = (diff: string) => {
  expect(diff).toContain(`+${GOOD}`);
  expect(diff).not.toContain(EVIL);
};

describe("takeDiff, with the model's index", () => {
  it.each([['--skip-worktree'], ['--assume-unchanged']])(
    'takes the worktree file, not the blob staged under an entry marked %s',
    async (mark) => {
      workspace.write({ 'add.js': EVIL });
      workspace.git('add', 'add.js');
      workspace.git('update-index', mark, 'add.js');
      workspace.write({ 'add.js': GOOD });
      expectWorktreeFile(await take());
    },
  );

  // git 2.39 reads a file whose stat matches its index entry for the entry's text, so the hunks
  // showed the worktree file here; but the `index` line named the staged blob, which is not the
  // file's: a diff whose header says one blob and whose text is another.
  it("names the worktree file's blob, not the staged one whose stat data was forged to match the file", async () => {
    // ctime cannot be set back, so the model's config stops git from comparing it.
    workspace.git('config', 'core.trustctime', 'false');
    const file = path.join(workspace.root, 'add.js');
    const past = new Date('2020-01-01T00:00:00Z');
    writeFileSync(file, EVIL);
    utimesSync(file, past, past);
    workspace.git('add', 'add.js');
    const staged = workspace.git('rev-parse', ':add.js').trim();
    // In place (same inode), same size, same mtime: the index entry matches the file by stat.
    writeFileSync(file, GOOD);
    utimesSync(file, past, past);
    expect(workspace.git('diff-files', '--name-only')).toBe('');
    const good = workspace.git('hash-object', 'add.js').trim();
    const diff = await take();
    expectWorktreeFile(diff);
    expect(diff).toMatch(new RegExp(`^index [0-9a-f]+\\.\\.${good.slice(0, 7)}`, 'm'));
    expect(diff).not.toContain(staged.slice(0, 7));
  });
});

describe("takeDiff, with the model's .git", () => {
  it('takes the workspace, not a shadow directory core.worktree points at', async () => {
    const shadow = path.join(outside, 'shadow');
    execFileSync('cp', ['-r', workspace.root, shadow]);
    writeFileSync(path.join(shadow, 'add.js'), EVIL);
    workspace.write({ 'add.js': GOOD });
    workspace.git('config', 'core.worktree', shadow);
    expectWorktreeFile(await take());
  });

  it('runs no hook of the repository (post-index-change ran during the add)', async () => {
    const marker = path.join(outside, 'hook-ran');
    const hook = path.join(workspace.root, '.git/hooks/post-index-change');
    workspace.write({ '.git/hooks/post-index-change': `#!/bin/sh\necho ran >> ${JSON.stringify(marker)}\n`, 'new.txt': 'fresh\n' });
    chmodSync(hook, 0o755);
    workspace.write({ 'add.js': GOOD });
    const diff = await take();
    expectWorktreeFile(diff);
    expect(diff).toContain('diff --git a/new.txt b/new.txt\nnew file mode 100644\n');
    expect(existsSync(marker)).toBe(false);
  });

  it('takes the change against the base, not the commit `git replace` put in its place', async () => {
    // A commit whose tree is the worktree's: against it, the change looks like none.
    workspace.write({ 'add.js': EVIL });
    workspace.git('add', '-A');
    workspace.git('commit', '-q', '-m', 'evil');
    const fake = workspace.git('rev-parse', 'HEAD').trim();
    workspace.git('reset', '-q', '--hard', base);
    workspace.git('replace', base, fake);
    workspace.write({ 'add.js': EVIL });
    const diff = await take();
    expect(diff).toContain('diff --git a/add.js b/add.js\n');
    expect(diff).toContain(`-export const add = () => 0;\n+${EVIL}`);
  });

  it('takes what info/attributes would hide: the model’s .git/info/attributes does not apply', async () => {
    workspace.write({ '.git/info/attributes': 'add.js -diff\n', 'add.js': GOOD });
    expectWorktreeFile(await take());
  });

  it('fails with DiffBaseMissingError (AgentFailed), rather than take the change against HEAD, when the base is gone', async () => {
    // The model committed its work and deleted the commit the run cloned from the objects.
    workspace.write({ 'add.js': GOOD });
    workspace.git('commit', '-q', '-am', 'work');
    rmSync(path.join(workspace.root, '.git/objects', base.slice(0, 2), base.slice(2)));
    const taking = take();
    await expect(taking).rejects.toSatisfy(DiffBaseMissingError.isInstance);
    await expect(taking).rejects.toMatchObject({ reason: REASONS.AgentFailed, base });
    await expect(taking).rejects.toThrow(/^taking the diff failed: the commit the run cloned \([0-9a-f]{40}\) is no longer/);
  });
});

/** The take's sandbox, its `mktemp -d` running `plant` (planting-mktemp.ts). */
const plantingMktemp = async (plant: string) => {
  session = await openSession(workspace);
  return plantInto(session, plant, outside);
};

describe("takeDiff, with its private repository's lock planted", () => {
  beforeEach(() => workspace.write({ 'add.js': GOOD, 'new.txt': 'fresh\n' }));

  it("takes the whole change in a repository in the model's .git when git cannot lock the index of the one in /tmp", async () => {
    const { sandbox, made } = await plantingMktemp(`[ -e ${outside}/once ] || { touch ${outside}/once; mkdir "$N/index.lock"; }`);
    const diff = (await takeDiff(sandbox, { timeoutMs: 30_000 }, base)).diff;
    expectWorktreeFile(diff);
    expect(diff).toContain('diff --git a/new.txt b/new.txt\nnew file mode 100644\n');
    expect(made()).toHaveLength(2);
    expect(made()[1]!.startsWith(path.join(workspace.root, '.git/'))).toBe(true);
    for (const name of made()) expect(existsSync(name)).toBe(false);
  });

  it("fails naming the lock, rather than take the model's index, when git can lock neither", async () => {
    const { sandbox } = await plantingMktemp('mkdir "$N/index.lock"');
    await expect(takeDiff(sandbox, { timeoutMs: 30_000 }, base)).rejects.toThrow(
      /^taking the diff failed: git could not read .*git add exited 128: .*index\.lock.*File exists/,
    );
  });
});

// A toolbox older than the operatorEnvironment field cannot answer at all (the default
// toolboxCommand, /opt/chamvi/node, is absent from those images), so the run's PATH never reaches
// these commands: they no longer set PATH (a fixed /usr/bin:/bin broke `run --local` where git
// lives elsewhere). What they still do themselves is drop the git environment: whatever reaches
// them, a HOME with the model's .gitconfig or a GIT_* naming another repository or settings
// chooses nothing for their git.
describe("takeDiff and the import check, with the run's HOME and GIT_* in their environment", () => {
  let marker: string;
  /** A repository outside the workspace, with a commit of its own: what the run's GIT_DIR names. */
  let elsewhere: string;
  beforeEach(() => {
    marker = path.join(outside, 'ran');
    workspace.write({
      '.gitconfig': `[filter "x"]\n\tclean = "sh -c 'echo home-filter >> ${marker}; cat'"\n`,
      '.gitattributes': '*.js filter=x\n',
      'add.js': GOOD,
    });
    elsewhere = path.join(outside, 'elsewhere');
    execFileSync('git', ['init', '-q', elsewhere]);
    execFileSync('git', [
      '-C',
      elsewhere,
      '-c',
      'user.name=t',
      '-c',
      'user.email=t@example.com',
      'commit',
      '-q',
      '--allow-empty',
      '-m',
      'other',
    ]);
  });

  /** A sandbox whose toolbox runs every bash in the run's environment: the field dropped. */
  const runEnvironment = async (extra: NodeJS.ProcessEnv = {}): Promise<Sandbox> => {
    session = await openSession(workspace, {
      ...process.env,
      HOME: workspace.root,
      GIT_DIR: path.join(elsewhere, '.git'),
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'filter.x.clean',
      GIT_CONFIG_VALUE_0: `sh -c 'echo env-filter >> ${marker}; cat'`,
      ...extra,
    });
    const inner = session;
    return {
      ...inner,
      call: (request: ToolRequest, options) => {
        const { operatorEnvironment: _ignored, ...older } = request;
        return inner.call(older, options);
      },
    };
  };

  it("takes the workspace's change without its HOME's .gitconfig or the run's GIT_* choosing anything", async () => {
    const sandbox = await runEnvironment();
    expectWorktreeFile((await takeDiff(sandbox, { timeoutMs: 30_000 }, base)).diff);
    expect(existsSync(marker) ? readFileSync(marker, 'utf8') : '').toBe('');
  });

  // A setting git refuses, given by the run's GIT_CONFIG_*: the check's git failed, and prepare
  // took the import for one that left no HEAD.
  it("checks the import in the workspace's repository, with none of the run's GIT_* settings", async () => {
    const sandbox = await runEnvironment({ GIT_CONFIG_COUNT: '2', GIT_CONFIG_KEY_1: 'core.abbrev', GIT_CONFIG_VALUE_1: 'none-such' });
    const check = resultOf<{ exitCode: number | null; stdout: string }>(await sandbox.call(IMPORT_CHECK));
    expect(check.exitCode).toBe(0);
    expect(check.stdout.trim()).toBe(base);
  });

  // `run --local` on a host whose git is not in /usr/bin or /bin (Nix, Homebrew on Linux): a
  // fixed PATH=/usr/bin:/bin ran no git there, or the host's other one.
  it('runs the git on the PATH the toolbox gives, outside /usr/bin and /bin too', async () => {
    const bin = path.join(outside, 'nix-profile-bin');
    const realGit = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
    workspace.write({ 'add.js': GOOD });
    execFileSync('mkdir', ['-p', bin]);
    writeFileSync(path.join(bin, 'git'), `#!/bin/sh\necho "$1" >> ${JSON.stringify(marker)}\nexec ${realGit} "$@"\n`);
    chmodSync(path.join(bin, 'git'), 0o755);
    session = await openSession(workspace, { ...process.env, PATH: [bin, process.env.PATH].join(path.delimiter) });
    expectWorktreeFile((await takeDiff(session, { timeoutMs: 30_000 }, base)).diff);
    const check = resultOf<{ exitCode: number | null; stdout: string }>(await session.call(IMPORT_CHECK));
    expect(check.stdout.trim()).toBe(base);
    expect(readFileSync(marker, 'utf8')).toMatch(/^init\n[\s\S]*--git-dir=\.git\n$/);
  });
});
