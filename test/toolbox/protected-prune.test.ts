// `import --prune` (protected-prune.ts) against a workspace the model changed the modes of. The
// toolbox runs as the model's user, never root, so a `chmod 300 test` hid test/conftest.py from
// both walks of the prune, which then "succeeded" and left it to decide the check. The bundled
// toolbox runs as a real process; under root it is started as another uid (setpriv), since
// root reads any directory whatever its mode.
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decodeResponse } from '../../sandbox-image/toolbox/contract/protocol.ts';
import type { ToolResponse } from '../../sandbox-image/toolbox/contract/tool-results.ts';
import { makeTar } from '../support/sandbox-contract.ts';
import { makeWorkspace, TOOLBOX, type Workspace } from './toolbox-fixture.ts';

const asRoot = process.getuid?.() === 0;
/** The model's (and the toolbox's) uid when this test runs as root. */
const MODEL_UID = 4321;

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => {
  // Modes back first, so the cleanup (as this process) can empty every directory.
  const open = (dir: string): void => {
    chmodSync(dir, 0o700);
    for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) open(path.join(dir, entry.name));
  };
  open(path.dirname(workspace.root));
  workspace.cleanup();
});

/** Hands the workspace and home to the model's uid (under root), except the paths in `keep`. */
function ownedByTheModel(keep: string[] = []): void {
  if (!asRoot) return;
  const give = (at: string): void => {
    if (keep.includes(at)) return;
    if (lstatSync(at).isDirectory()) for (const name of readdirSync(at)) give(path.join(at, name));
    chownSync(at, MODEL_UID, MODEL_UID);
  };
  give(path.dirname(workspace.root));
}

/** `toolbox import --prune GLOB...` of the archive, as the model's user; its one response. */
function importPruning(archive: Buffer, prune: string[]): Promise<ToolResponse> {
  const toolbox = [TOOLBOX, '--root', workspace.root, '--home', workspace.home, 'import', ...prune.flatMap((glob) => ['--prune', glob])];
  const [command, args] = asRoot
    ? ['setpriv', [`--reuid=${MODEL_UID}`, `--regid=${MODEL_UID}`, '--clear-groups', process.execPath, ...toolbox]]
    : [process.execPath, toolbox];
  return new Promise((resolve, reject) => {
    const child = spawn(command as string, args as string[], { cwd: workspace.root, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const reading = decodeResponse(stdout);
      if (code !== 0 || reading.kind === 'invalid') reject(new Error(`toolbox exited ${code}: ${stderr}${stdout}`));
      else resolve(reading.response);
    });
    child.stdin.end(archive);
  });
}

const original = makeTar([{ name: 'test/test_a.py', content: 'def test_add():\n    assert add(2, 2) == 4\n' }]);
const at = (relative: string) => path.join(workspace.root, relative);

describe('import --prune in directories the model took its own access from', () => {
  it('prunes what the model left in a protected directory it made unreadable (chmod 300)', async () => {
    workspace.write({ 'test/test_a.py': 'def test_add():\n    pass\n', 'test/conftest.py': '# makes every test pass\n' });
    ownedByTheModel();
    chmodSync(at('test'), 0o300);
    const response = await importPruning(original, ['test/**']);
    expect(response).toMatchObject({ ok: true, result: { files: 1, pruned: 2 } });
    expect(existsSync(at('test/conftest.py'))).toBe(false);
    expect(readFileSync(at('test/test_a.py'), 'utf8')).toContain('assert add(2, 2) == 4');
  });

  it('prunes a protected directory holding a subdirectory it cannot read or write (chmod 100)', async () => {
    workspace.write({ 'test/test_a.py': 'pass\n', 'test/fixtures/conftest.py': '# makes every test pass\n' });
    ownedByTheModel();
    chmodSync(at('test/fixtures'), 0o100);
    chmodSync(at('test'), 0o500);
    const response = await importPruning(original, ['test']);
    expect(response).toMatchObject({ ok: true, result: { files: 1, pruned: 1 } });
    expect(existsSync(at('test/fixtures'))).toBe(false);
    expect(readFileSync(at('test/test_a.py'), 'utf8')).toContain('assert add(2, 2) == 4');
  });

  it.skipIf(!asRoot)('fails the import, saying which path, when a directory cannot be opened at all', async () => {
    workspace.write({ 'test/test_a.py': 'pass\n', 'test/locked/conftest.py': '# makes every test pass\n' });
    // Another uid's directory: the toolbox may not change its mode.
    ownedByTheModel([at('test/locked')]);
    chmodSync(at('test/locked'), 0o700);
    const response = await importPruning(original, ['test/**']);
    expect(response).toMatchObject({ ok: false, error: { code: 'IO_ERROR' } });
    expect(!response.ok && response.error.message).toMatch(/"test\/locked" could not be (read|removed) \(EACCES\).*the check is not run/);
    expect(existsSync(at('test/locked/conftest.py'))).toBe(true);
  });
});
