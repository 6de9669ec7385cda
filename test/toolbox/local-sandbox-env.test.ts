// run --local gives its toolbox (node, and every git that node runs) the environment
// sandboxEnvironment builds. The toolbox passes that environment on to bash unchanged and has no
// separate one for the model's commands, so a spec.sandbox.env variable that node or git reads
// at start ran code on the user's machine before any approval: these perform two of them.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { sandboxEnvironment } from '../../operator/src/cli/local/local-sandbox-factory.ts';
import { createLocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratch(): { workspace: string; home: string; marker: string } {
  const base = mkdtempSync(path.join(tmpdir(), 'chamvi-local-env-'));
  dirs.push(base);
  const workspace = path.join(base, 'workspace');
  const home = path.join(base, 'home');
  mkdirSync(workspace);
  mkdirSync(path.join(home, '.chamvi'), { recursive: true });
  return { workspace, home, marker: path.join(base, 'marker') };
}

/** A run as the factory gets it; only spec.sandbox.env is read. */
const runWith = (env: Array<{ name: string; value: string }>) => ({ spec: { sandbox: { env } } }) as unknown as ParsedCodingRun;

/** Starts the toolbox of `run --local` with the environment it gives `run`, and lists the workspace's files with it. */
async function listFilesInToolbox(run: ParsedCodingRun, workspace: string, home: string): Promise<void> {
  const sandbox = await createLocalSandbox({
    mode: 'serve',
    workspaceDir: workspace,
    homeDir: path.join(home, '.chamvi'),
    env: sandboxEnvironment(run, home, process.env),
  });
  try {
    const response = await sandbox.call({ tool: 'list_files', input: {} });
    expect(response.ok).toBe(true);
  } finally {
    await sandbox.close();
  }
}

describe('run --local: the toolbox process does not take the variables node and git read at start', () => {
  it('a NODE_OPTIONS that imports code does not run it when the toolbox starts', async () => {
    const { workspace, home, marker } = scratch();
    const script = `import('node:fs').then((fs) => fs.writeFileSync(${JSON.stringify(marker)}, 'ran'))`;
    const run = runWith([{ name: 'NODE_OPTIONS', value: `--import=data:text/javascript,${encodeURIComponent(script)}` }]);
    await listFilesInToolbox(run, workspace, home);
    expect(existsSync(marker)).toBe(false);
  });

  it("a PATH with a relative entry does not make list_files run the repository's own git", async () => {
    const { workspace, home, marker } = scratch();
    execFileSync('git', ['init', '-q', workspace]);
    const systemGit = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
    writeFileSync(path.join(workspace, 'git'), `#!/bin/sh\ntouch ${JSON.stringify(marker)}\nexec ${systemGit} "$@"\n`);
    chmodSync(path.join(workspace, 'git'), 0o755);
    const run = runWith([{ name: 'PATH', value: `.${path.delimiter}${process.env.PATH}` }]);
    await listFilesInToolbox(run, workspace, home);
    expect(existsSync(marker)).toBe(false);
  });
});
