// The plugin's two launchers, as processes: operator/bin/kubectl-codingrun (a checkout) and the
// shell script of the krew archive (operator/tools/release/krew-manifest.ts). On a node older
// than package.json's "engines" each says which Node.js it needs and exits 1 before anything
// is loaded; an older node that got further died inside undici with a TypeError and a stack.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { krewLauncherScript } from '../../operator/tools/release/krew-manifest.ts';
import { PLUGIN_BUNDLE_FILE, PLUGIN_COMMAND } from '../../operator/tools/release/plugin-package.ts';
import { pluginPath } from '../support/plugin.ts';
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

it('reads the Node.js major version the plugin needs from package.json "engines"', () => {
  expect(REQUIRED).toBeGreaterThanOrEqual(24);
});

describe('the checkout launcher (operator/bin/kubectl-codingrun)', () => {
  /** Runs the launcher with this node, which reports `version` as its own. */
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

  /** PATH whose first `node` says it is `version` and otherwise is this test's node. */
  function pathWithNode(version: string): string {
    const dir = mkdtempSync(join(base, 'node-'));
    writeFileSync(
      join(dir, 'node'),
      `#!/bin/sh\nif [ "$1" = --version ]; then echo v${version}; exit 0; fi\nexec '${process.execPath}' "$@"\n`,
    );
    chmodSync(join(dir, 'node'), 0o755);
    return `${dir}:/usr/bin:/bin`;
  }

  it.each([`${REQUIRED - 1}.99.0`, '20.20.2', '9.11.2'])(
    'refuses a node that says it is %s with one line naming the version it needs, without running the bundle',
    async (version) => {
      const path = pathWithNode(version);
      const result = await runProcess(linked, ['--help'], { env: { PATH: path }, stdin: 'ignore' });
      expect(result.stderr).toBe(refusal(join(path.split(':')[0]!, 'node'), version));
      expect(result.stdout).toBe('');
      expect(result.code).toBe(1);
    },
  );

  it.each([`${REQUIRED}.0.0`, `${REQUIRED + 1}.2.3`])('runs the bundle beside it with a node that says it is %s', async (version) => {
    const result = await runProcess(linked, ['get', 'x'], { env: { PATH: pathWithNode(version) }, stdin: 'ignore' });
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
