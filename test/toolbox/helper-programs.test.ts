// In the pod the toolbox's PATH and HOME are the run's (spec.sandbox.env), and a project's PATH
// often starts in the workspace (/workspace/.venv/bin). These perform the repository's own
// programs and git config reaching the toolbox's read tools, which run before any approval:
// none of them may run, while the model's bash still sees the run's PATH.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codingRunSpec } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { callTool, makeWorkspace, resultOf, type Workspace } from './toolbox-fixture.ts';

const HELPERS = ['git', 'rg', 'grep', 'xargs', 'bash'];

let workspace: Workspace;
let outside: string;
let marker: string;
beforeEach(() => {
  workspace = makeWorkspace();
  outside = mkdtempSync(path.join(tmpdir(), 'chamvi-helper-marker-'));
  marker = path.join(outside, 'ran');
  workspace.write({ 'a.txt': 'needle\n' });
  workspace.git('init', '-q');
  workspace.git('add', '.');
  workspace.git('commit', '-q', '-m', 'init');
  // The repository's own helpers, committed where a project's PATH looks first.
  for (const name of HELPERS) {
    workspace.write({ [`.venv/bin/${name}`]: `#!/bin/sh\necho "${name} $*" >> ${JSON.stringify(marker)}\nexit 3\n` });
    chmodSync(path.join(workspace.root, '.venv/bin', name), 0o755);
  }
  workspace.write({ 'a.txt': 'needle changed\n' });
});
afterEach(() => {
  workspace.cleanup();
  rmSync(outside, { recursive: true, force: true });
});

/** The run's environment: its PATH starts in the workspace, by an absolute and a relative entry. */
function runEnvironment(): NodeJS.ProcessEnv {
  return { ...process.env, PATH: [path.join(workspace.root, '.venv/bin'), '.venv/bin', process.env.PATH].join(path.delimiter) };
}

const ran = () => (existsSync(marker) ? execFileSync('cat', [marker], { encoding: 'utf8' }) : '');

describe("the toolbox's own helpers are never the repository's", () => {
  it('list_files, grep and git_diff do not run a git, rg, grep or xargs the run PATH finds in the workspace', async () => {
    const listing = resultOf<{ files: string[] }>(await callTool(workspace, 'list_files', {}, { env: runEnvironment() }));
    expect(listing.files).toContain('a.txt');
    const search = resultOf<{ matches: Array<{ path: string }> }>(
      await callTool(workspace, 'grep', { pattern: 'needle' }, { env: runEnvironment() }),
    );
    expect(search.matches.map((match) => match.path)).toEqual(['a.txt']);
    const diff = resultOf<{ diff: string }>(await callTool(workspace, 'git_diff', {}, { env: runEnvironment() }));
    expect(diff.diff).toContain('+needle changed');
    expect(ran()).toBe('');
  });

  it("git_diff does not read a .gitconfig in the run's HOME", async () => {
    // A textconv the repository's files would name, and its config in a HOME in the workspace.
    workspace.write({
      '.gitattributes': '*.txt diff=shout\n',
      '.gitconfig': `[diff "shout"]\n\ttextconv = "sh -c 'echo textconv >> ${marker}; cat \\"$0\\"'"\n`,
    });
    const diff = resultOf<{ diff: string }>(await callTool(workspace, 'git_diff', {}, { env: { ...process.env, HOME: workspace.root } }));
    expect(diff.diff).toContain('+needle changed');
    expect(ran()).toBe('');
  });

  it("git_diff does not take the run's GIT_* settings", async () => {
    // The same textconv, given through GIT_CONFIG_* (git_diff's --no-ext-diff would ignore an
    // external diff whatever the environment, so a textconv is what shows the settings read).
    workspace.write({ '.gitattributes': '*.txt diff=shout\n' });
    const env = {
      ...process.env,
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'diff.shout.textconv',
      GIT_CONFIG_VALUE_0: `sh -c 'echo gitenv >> ${marker}; cat "$0"'`,
    };
    const diff = resultOf<{ diff: string }>(await callTool(workspace, 'git_diff', {}, { env }));
    expect(diff.diff).toContain('+needle changed');
    expect(ran()).toBe('');
  });

  it("bash starts the image's shell, and the model's commands keep the run's PATH", async () => {
    const env = runEnvironment();
    const result = resultOf<{ stdout: string; exitCode: number }>(await callTool(workspace, 'bash', { command: 'echo "$PATH"' }, { env }));
    expect(result.exitCode).toBe(0);
    expect(result.stdout.trim()).toBe(env.PATH);
    expect(ran()).toBe('');
  });
});

/**
 * The environment pods/exec starts the toolbox with for a run that sets `env`: the sandbox
 * container's, as buildSandboxPod writes it ($$ read back as $), over this machine's (but HOME
 * and TMPDIR, which name the pod's volumes).
 */
function podEnvironment(env: Array<{ name: string; value: string }>): NodeJS.ProcessEnv {
  const run = codingRunFixture({ spec: { sandbox: { env } } });
  const pod = buildSandboxPod(
    { ...run, spec: codingRunSpec.parse(run.spec) },
    loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1' }, {}),
  );
  const container = pod.spec!.containers[0]!.env!.filter(({ name }) => name !== 'HOME' && name !== 'TMPDIR');
  return { ...process.env, ...Object.fromEntries(container.map(({ name, value }) => [name, (value ?? '').replaceAll('$$', '$')])) };
}

describe("the run's NODE_OPTIONS and LD_* reach the model's commands, not the toolbox's node", () => {
  it('a NODE_OPTIONS that imports code does not run in the toolbox, and bash still has it', async () => {
    const script = `import('node:fs').then((fs) => fs.appendFileSync(${JSON.stringify(marker)}, 'node_options\\n'))`;
    const nodeOptions = `--import=data:text/javascript,${encodeURIComponent(script)}`;
    const env = podEnvironment([
      { name: 'NODE_OPTIONS', value: nodeOptions },
      { name: 'LD_LIBRARY_PATH', value: '/workspace/.venv/lib' },
      { name: 'CI', value: 'true' },
    ]);
    resultOf(await callTool(workspace, 'list_files', {}, { env }));
    expect(ran()).toBe('');
    const shell = resultOf<{ stdout: string }>(
      await callTool(
        workspace,
        'bash',
        { command: 'node -e 0; echo "$NODE_OPTIONS|$LD_LIBRARY_PATH|$CI"; env | grep -c ^CHAMVI_RUN_ENV_' },
        { env },
      ),
    );
    // The model's node does import it: that is the run's own setting, in the model's command.
    expect(ran()).toBe('node_options\n');
    expect(shell.stdout).toBe(`${nodeOptions}|/workspace/.venv/lib|true\n0\n`);
  });
});
