// The plugin's two launchers, as processes: operator/bin/kubectl-codingrun (a checkout) and the
// shell script of the krew archive (operator/tools/release/krew-manifest.ts), both shell scripts
// that ask the node on PATH its version first; and the checkout's JavaScript entry beside the
// first, which checks again when a node runs it itself. On a node older than package.json's
// "engines" each says which Node.js it needs and exits 1 before anything is loaded; an older node
// that got further died inside undici with a TypeError and a stack, and Node.js 18 did not run the
// checkout's launcher at all while it was an extensionless ES module.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { krewLauncherScript } from '../../operator/tools/release/krew-manifest.ts';
import { PLUGIN_BUNDLE_FILE, PLUGIN_COMMAND } from '../../operator/tools/release/plugin-package.ts';
import { pluginLauncherPath, pluginPath } from '../support/plugin.ts';
import { runProcess } from '../support/run-process.ts';

const engines = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } }).engines
  .node;
const REQUIRED = Number(/^>=(\d+)$/.exec(engines)?.[1]);
const refusal = (node: string, version: string) =>
  `kubectl-codingrun: needs Node.js ${REQUIRED} or later as 'node' on PATH; ${node} is Node.js ${version}\n`;

/** A node on this machine older than REQUIRED (the distribution's), if there is one. */
const olderNode = ['/usr/bin/node', '/usr/local/bin/node'].find(
  (candidate) =>
    existsSync(candidate) && Number(execFileSync(candidate, ['--version'], { encoding: 'utf8' }).slice(1).split('.')[0]) < REQUIRED,
);

/** A PATH, made under `base`, whose first `node` says it is `version` and otherwise is this test's node. */
function pathWithNode(base: string, version: string): string {
  return pathWithFakeNode(base, `if [ "$1" = --version ]; then echo v${version}; exit 0; fi\nexec '${process.execPath}' "$@"`);
}

/** A PATH, made under `base`, whose first `node` is a shell script of `body`. */
function pathWithFakeNode(base: string, body: string): string {
  const dir = mkdtempSync(join(base, 'node-'));
  writeFileSync(join(dir, 'node'), `#!/bin/sh\n${body}\n`);
  chmodSync(join(dir, 'node'), 0o755);
  return `${dir}:/usr/bin:/bin`;
}

it('reads the Node.js major version the plugin needs from package.json "engines"', () => {
  expect(REQUIRED).toBeGreaterThanOrEqual(24);
});

describe("the checkout's entry (operator/bin/plugin-entry.mjs) run by a node itself", () => {
  /** Runs the entry with this node, which reports `version` as its own. */
  const runAs = (version: string) =>
    runProcess(
      process.execPath,
      ['--import', `data:text/javascript,Object.defineProperty(process.versions, 'node', { value: '${version}' })`, pluginPath, '--help'],
      { stdin: 'ignore' },
    );

  it.each([`${REQUIRED - 1}.99.0`, '20.20.2', '18.0.0'])(
    'refuses Node.js %s with one line naming the version it needs',
    async (version) => {
      const result = await runAs(version);
      expect(result.stderr).toBe(refusal(process.execPath, version));
      expect(result.stdout).toBe('');
      expect(result.code).toBe(1);
    },
  );

  it('runs the plugin on the Node.js it needs', async () => {
    const result = await runAs(`${REQUIRED}.0.0`);
    expect(result.stdout).toMatch(/^kubectl-codingrun: watch, approve and inspect CodingRuns/);
    expect(result.code).toBe(0);
  }, 30_000);

  it.skipIf(!olderNode)("refuses the machine's older node before undici fails in it: no TypeError, no stack", async () => {
    const result = await runProcess(olderNode!, [pluginPath, '--help'], { stdin: 'ignore' });
    const version = execFileSync(olderNode!, ['--version'], { encoding: 'utf8' }).trim().slice(1);
    expect(result.stderr).toBe(refusal(olderNode!, version));
    expect(result.code).toBe(1);
  });
});

describe('the checkout launcher (operator/bin/kubectl-codingrun)', () => {
  let base: string;
  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'chamvi-checkout-launcher-'));
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('refuses Node.js 18.19 (Debian 12, Ubuntu 24.04) with one line naming the version it needs, not its error and stack', async () => {
    // What Node.js 18.19 says when given an extensionless file under "type": "module", as the
    // launcher was: it refused the file before any check in it ran.
    const path = pathWithFakeNode(
      base,
      [
        'if [ "$1" = --version ]; then echo v18.19.0; exit 0; fi',
        'echo "node:internal/errors:496" >&2',
        'echo "TypeError [ERR_UNKNOWN_FILE_EXTENSION]: Unknown file extension \\"\\" for $1" >&2',
        'echo "    at new NodeError (node:internal/errors:405:5)" >&2',
        'exit 1',
      ].join('\n'),
    );
    const result = await runProcess(pluginLauncherPath, ['--help'], { env: { PATH: path }, stdin: 'ignore' });
    expect(result.stderr).toBe(refusal(join(path.split(':')[0]!, 'node'), '18.19.0'));
    expect(result.stdout).toBe('');
    expect(result.code).toBe(1);
  });

  it.each([`${REQUIRED - 1}.99.0`, '20.9.0'])('refuses a node that says it is %s, without running it on the plugin', async (version) => {
    const path = pathWithNode(base, version);
    const result = await runProcess(pluginLauncherPath, ['--help'], { env: { PATH: path }, stdin: 'ignore' });
    expect(result.stderr).toBe(refusal(join(path.split(':')[0]!, 'node'), version));
    expect(result.stdout).toBe('');
    expect(result.code).toBe(1);
  });

  it("runs the plugin with a node whose version manager's shim prints a notice before the version", async () => {
    const path = pathWithFakeNode(
      base,
      `if [ "$1" = --version ]; then echo 'shim: using the version of .nvmrc'; echo v${REQUIRED}.1.0; exit 0; fi\nexec '${process.execPath}' "$@"`,
    );
    const result = await runProcess(pluginLauncherPath, ['--help'], { env: { PATH: path }, stdin: 'ignore' });
    expect(result.stdout).toMatch(/^kubectl-codingrun: watch, approve and inspect CodingRuns/);
    expect(result.code).toBe(0);
  }, 30_000);

  it('says it needs node when there is none on PATH', async () => {
    const result = await runProcess(pluginLauncherPath, ['--help'], { env: { PATH: mkdtempSync(join(base, 'empty-')) }, stdin: 'ignore' });
    expect(result.stderr).toBe(`kubectl-codingrun: needs Node.js ${REQUIRED} or later as 'node' on PATH\n`);
    expect(result.code).toBe(1);
  });

  it('runs the plugin with the node it needs, through a symlink as npm links it', async () => {
    const bin = mkdtempSync(join(base, 'bin-'));
    symlinkSync(pluginLauncherPath, join(bin, PLUGIN_COMMAND));
    const result = await runProcess(join(bin, PLUGIN_COMMAND), ['--help'], {
      env: { PATH: pathWithNode(base, `${REQUIRED}.0.0`) },
      stdin: 'ignore',
    });
    expect(result.stdout).toMatch(/^kubectl-codingrun: watch, approve and inspect CodingRuns/);
    expect(result.code).toBe(0);
  }, 30_000);

  it.skipIf(!olderNode)("refuses the machine's older node", async () => {
    const dir = mkdtempSync(join(base, 'older-'));
    symlinkSync(olderNode!, join(dir, 'node'));
    const version = execFileSync(olderNode!, ['--version'], { encoding: 'utf8' }).trim().slice(1);
    const result = await runProcess(pluginLauncherPath, ['--help'], { env: { PATH: `${dir}:/usr/bin:/bin` }, stdin: 'ignore' });
    expect(result.stderr).toBe(refusal(join(dir, 'node'), version));
    expect(result.code).toBe(1);
  });
});

describe("the krew archive's launcher", () => {
  let base: string;
  let linked: string;

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'chamvi-launcher-'));
    // As krew lays it out: the archive's files in a directory, a symlink to the launcher on PATH.
    const archive = join(base, 'archive');
    mkdirSync(archive);
    writeFileSync(join(archive, PLUGIN_COMMAND), krewLauncherScript(PLUGIN_BUNDLE_FILE));
    chmodSync(join(archive, PLUGIN_COMMAND), 0o755);
    writeFileSync(join(archive, PLUGIN_BUNDLE_FILE), 'process.stdout.write(`bundle ran: ${process.argv.slice(2).join(" ")}\\n`);\n');
    mkdirSync(join(base, 'bin'));
    linked = join(base, 'bin', PLUGIN_COMMAND);
    symlinkSync(join(archive, PLUGIN_COMMAND), linked);
  });

  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it.each([`${REQUIRED - 1}.99.0`, '20.20.2', '9.11.2'])(
    'refuses a node that says it is %s with one line naming the version it needs, without running the bundle',
    async (version) => {
      const path = pathWithNode(base, version);
      const result = await runProcess(linked, ['--help'], { env: { PATH: path }, stdin: 'ignore' });
      expect(result.stderr).toBe(refusal(join(path.split(':')[0]!, 'node'), version));
      expect(result.stdout).toBe('');
      expect(result.code).toBe(1);
    },
  );

  it.each([`${REQUIRED}.0.0`, `${REQUIRED + 1}.2.3`])('runs the bundle beside it with a node that says it is %s', async (version) => {
    const result = await runProcess(linked, ['get', 'x'], { env: { PATH: pathWithNode(base, version) }, stdin: 'ignore' });
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('bundle ran: get x\n');
    expect(result.code).toBe(0);
  });

  it.skipIf(!olderNode)("refuses the machine's older node", async () => {
    const dir = mkdtempSync(join(base, 'older-'));
    symlinkSync(olderNode!, join(dir, 'node'));
    const version = execFileSync(olderNode!, ['--version'], { encoding: 'utf8' }).trim().slice(1);
    const result = await runProcess(linked, ['--help'], { env: { PATH: `${dir}:/usr/bin:/bin` }, stdin: 'ignore' });
    expect(result.stderr).toBe(refusal(join(dir, 'node'), version));
    expect(result.code).toBe(1);
  });
});
