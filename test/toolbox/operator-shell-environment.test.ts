// The operator's own commands in the toolbox's bash (prepare's import check, takeDiff at every
// diff snapshot and at finalize) run before any approval and whatever the run's policy gates. In
// the pod the toolbox's environment is the run's (spec.sandbox.env): a PATH that starts in the
// workspace ran a committed .venv/bin/git for them, and HOME=/workspace had a .gitconfig the model
// wrote name a clean filter that the snapshot's `git add` ran. These perform both; the model's own
// bash still gets the run's PATH and HOME.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import { IMPORT_CHECK } from '../../operator/src/workers/prepare-job.ts';
import { takeDiff } from '../../operator/src/workers/take-diff.ts';
import { makeWorkspace, openSession, resultOf, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
let outside: string;
let marker: string;
let sandbox: LocalSandbox | undefined;
beforeEach(() => {
  workspace = makeWorkspace();
  outside = mkdtempSync(path.join(tmpdir(), 'chamvi-operator-shell-'));
  marker = path.join(outside, 'ran');
  // A committed git that records its run, then hands over to the real git, so nothing fails
  // because of it: only the marker tells that it ran.
  const realGit = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
  workspace.write({
    'a.txt': 'one\n',
    '.venv/bin/git': `#!/bin/sh\necho "venv git $*" >> ${JSON.stringify(marker)}\nexec ${realGit} "$@"\n`,
  });
  chmodSync(path.join(workspace.root, '.venv/bin/git'), 0o755);
  workspace.git('init', '-q');
  workspace.git('add', '-A');
  workspace.git('commit', '-q', '-m', 'init');
});
afterEach(async () => {
  await sandbox?.close();
  sandbox = undefined;
  workspace.cleanup();
  rmSync(outside, { recursive: true, force: true });
});

/** spec.sandbox.env as a project sets it: PATH starts in the workspace, HOME is the workspace. */
const runEnvironment = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: [path.join(workspace.root, '.venv/bin'), process.env.PATH].join(path.delimiter),
  HOME: workspace.root,
  ...extra,
});

const ran = () => (existsSync(marker) ? readFileSync(marker, 'utf8') : '');

async function session(extra: NodeJS.ProcessEnv = {}): Promise<LocalSandbox> {
  sandbox = await openSession(workspace, runEnvironment(extra));
  return sandbox;
}

describe("the operator's own shell commands do not take the run's PATH, HOME or git settings", () => {
  it("prepare's import check does not run a .venv/bin/git on the run's PATH", async () => {
    const sandbox = await session();
    const check = resultOf<{ exitCode: number | null; stdout: string }>(await sandbox.call(IMPORT_CHECK));
    expect(check.exitCode).toBe(0);
    expect(check.stdout.trim()).toMatch(/^[0-9a-f]{40}$/);
    expect(ran()).toBe('');
  });

  it("takeDiff does not run a .venv/bin/git on the run's PATH, and still takes the change", async () => {
    const sandbox = await session();
    workspace.write({ 'a.txt': 'two\n', 'new.txt': 'fresh\n' });
    const taken = await takeDiff(sandbox, { timeoutMs: 60_000 });
    expect(taken.diff).toContain('-one\n+two');
    expect(taken.diff).toContain('+++ b/new.txt');
    expect(taken.truncated).toBe(false);
    expect(ran()).toBe('');
  });

  it('a clean filter in a .gitconfig the model wrote in HOME=/workspace does not run at a snapshot', async () => {
    const sandbox = await session();
    // What write_file steps do: the config where the run's HOME reads it, and the attribute naming it.
    workspace.write({
      '.gitconfig': `[filter "x"]\n\tclean = "sh -c 'echo clean-filter >> ${marker}; cat'"\n`,
      '.gitattributes': '*.txt filter=x\n',
      'a.txt': 'two, longer\n',
    });
    const taken = await takeDiff(sandbox, { timeoutMs: 60_000 });
    expect(taken.diff).toContain('+two, longer');
    expect(taken.diff).toContain('+++ b/.gitattributes');
    await takeDiff(sandbox, { timeoutMs: 60_000, clean: true }); // finalize's take
    expect(ran()).toBe('');
  });

  it("an operator shell has the trusted PATH, no HOME, no git settings and no held variable, and the model's bash the run's", async () => {
    const sandbox = await session({
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'filter.x.clean',
      GIT_CONFIG_VALUE_0: 'cat',
      GIT_DIR: path.join(workspace.root, '.git'),
      XDG_CONFIG_HOME: workspace.root,
      BASH_ENV: path.join(workspace.root, 'env.sh'),
      CHAMVI_RUN_ENV_LD_PRELOAD: path.join(workspace.root, 'preload.so'),
    });
    workspace.write({ 'env.sh': `echo bash-env >> ${JSON.stringify(marker)}\n` });
    const show =
      'printf "%s|%s|%s|%s|%s|%s\\n" "$PATH" "$HOME" "${XDG_CONFIG_HOME-unset}" "${LD_PRELOAD-unset}" "${GIT_DIR-unset}" "$(command -v git)"';
    const operator = resultOf<{ stdout: string }>(
      await sandbox.call({ tool: 'bash', input: { command: show }, clean: 'keep-jobs', operatorEnvironment: true }),
    );
    const [searchPath, home, xdg, preload, gitDir, git] = operator.stdout.trim().split('|');
    expect(searchPath!.split(':')).not.toContain(path.join(workspace.root, '.venv/bin'));
    expect(home).toBe('/nonexistent');
    expect([xdg, preload, gitDir]).toEqual(['unset', 'unset', 'unset']);
    expect(git).not.toContain(workspace.root);
    expect(ran()).toBe('');

    const model = resultOf<{ stdout: string }>(await sandbox.call({ tool: 'bash', input: { command: show } }));
    const [, modelHome, , modelPreload, , modelGit] = model.stdout.trim().split('|');
    expect([modelHome, modelPreload, modelGit]).toEqual([
      workspace.root,
      path.join(workspace.root, 'preload.so'),
      path.join(workspace.root, '.venv/bin/git'),
    ]);
  });

  it('the model cannot ask for it: an operatorEnvironment inside a bash input is refused or ignored', async () => {
    const sandbox = await session();
    const response = await sandbox.call({ tool: 'bash', input: { command: 'echo "$HOME"', operatorEnvironment: true } });
    if (response.ok) expect((response.result as { stdout: string }).stdout.trim()).toBe(workspace.root);
    else expect(response.error.code).toBe('INVALID_INPUT');
  });
});
