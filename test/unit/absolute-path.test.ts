// A command started in a clone of the run's repository finds git and tar by the absolute
// entries of PATH only: a relative entry is looked up from the clone, where a repository may
// have committed `bin/tar` or `node_modules/.bin/git`.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { sandboxEnvironment } from '../../operator/src/cli/local/local-sandbox-factory.ts';
import { parseSpec } from '../../operator/src/reconcile/validate-run.ts';
import { absolutePath } from '../../operator/src/workers/absolute-path.ts';
import { launchHere, launchToEnd } from '../../operator/src/workers/process-launcher.ts';

const savedPath = process.env.PATH;
const dirs: string[] = [];
afterEach(() => {
  process.env.PATH = savedPath;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('absolutePath', () => {
  it('keeps the absolute entries in their order and drops empty and relative ones', () => {
    expect(absolutePath(['', '.', 'bin', '/usr/local/bin', 'node_modules/.bin', '/usr/bin'].join(path.delimiter))).toBe(
      ['/usr/local/bin', '/usr/bin'].join(path.delimiter),
    );
    expect(absolutePath(undefined)).toBeUndefined();
  });
});

describe('a relative PATH entry and a repository that committed its own tar', () => {
  it('runs the system tar, not the clone’s bin/tar', async () => {
    const clone = mkdtempSync(path.join(tmpdir(), 'chamvi-path-'));
    dirs.push(clone);
    mkdirSync(path.join(clone, 'bin'));
    writeFileSync(path.join(clone, 'bin/tar'), `#!/bin/sh\ntouch ${clone}/ran\n`);
    chmodSync(path.join(clone, 'bin/tar'), 0o755);
    process.env.PATH = `bin${path.delimiter}${savedPath}`;
    await launchToEnd(launchHere, 'tar', ['-cf', 'out.tar', '--files-from', '/dev/null'], clone);
    expect(existsSync(path.join(clone, 'ran'))).toBe(false);
    expect(existsSync(path.join(clone, 'out.tar'))).toBe(true);
  });

  it('gives run --local tools a PATH of absolute entries only', () => {
    const parsed = parseSpec(codingRunFixture());
    if (!parsed.ok) throw new Error('fixture');
    const run = { ...codingRunFixture(), spec: parsed.spec } as Parameters<typeof sandboxEnvironment>[0];
    const env = sandboxEnvironment(run, '/tmp/home', { PATH: `node_modules/.bin${path.delimiter}.${path.delimiter}/usr/bin` });
    expect(env.PATH).toBe('/usr/bin');
  });
});
