// workers/git-limits.ts with real git and /bin/sh: the memory limit holds git's own process (a
// commit of 40 MiB, a pack of a few dozen KiB, is what index-pack reads whole), both limits
// reach the command with its arguments intact, and only git's own "out of memory" counts.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GIT_MEMORY_CONFIG, ranOutOfMemory, withLimits, type ProcessLimits } from '../../operator/src/workers/git-limits.ts';
import { git } from '../support/git-fixture.ts';

const MiB = 1024 * 1024;
let base: string;
let pack: Buffer;

/** Runs `command args` under the limits, as the workers launch it. */
function run(limits: ProcessLimits, command: string, args: string[], options: { cwd?: string; input?: Buffer } = {}) {
  const [file, argv] = withLimits(limits, command, args);
  return spawnSync(file, argv, { cwd: options.cwd ?? base, input: options.input, encoding: 'utf8', maxBuffer: 4 * MiB });
}

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), 'chamvi-git-limits-'));
  const source = join(base, 'source');
  git(['init', '-q', '--bare', source], base);
  const message = join(base, 'message');
  writeFileSync(message, `${'0'.repeat(40 * MiB)}\n`);
  const tree = git(['mktree'], source).trim();
  const commit = git(['commit-tree', '-F', message, tree], source).trim();
  pack = spawnSync('git', ['pack-objects', '--stdout'], { cwd: source, input: `${commit}\n${tree}\n`, maxBuffer: 16 * MiB }).stdout;
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('git limits', () => {
  it("holds git's index-pack to the memory limit: a pack of a 40 MiB commit fails under 24 MiB, at once, and is indexed without the limit", () => {
    expect(pack.length).toBeLessThan(MiB);
    const index = (limits: ProcessLimits) => {
      const dir = mkdtempSync(join(base, 'index-'));
      git(['init', '-q', '--bare', dir], base);
      return run(limits, 'git', [...GIT_MEMORY_CONFIG, 'index-pack', '--stdin'], { cwd: dir, input: pack });
    };
    const limited = index({ dataBytes: 24 * MiB });
    expect(limited.status).not.toBe(0);
    expect(ranOutOfMemory(limited.stderr)).toBe(true);
    expect(index({}).status).toBe(0);
  });

  it('sets both limits and hands the command its arguments untouched', () => {
    const shown = run({ dataBytes: 32 * MiB, fileBytes: MiB }, '/bin/sh', [
      '-c',
      'ulimit -d; ulimit -f; printf "%s|" "$@"',
      'sh',
      'a b',
      '$1',
      '-d',
    ]);
    expect(shown.stdout).toBe('32768\n2048\na b|$1|-d|');
    const one = run({ fileBytes: MiB }, '/bin/sh', ['-c', 'ulimit -d; ulimit -f']);
    expect(one.stdout).toBe(`${run({}, '/bin/sh', ['-c', 'ulimit -d']).stdout}2048\n`);
  });

  it("takes git's own out-of-memory for running out of its limit, and not a remote's", () => {
    expect(ranOutOfMemory('fatal: Out of memory, malloc failed (tried to allocate 314572963 bytes)\nfatal: index-pack failed\n')).toBe(
      true,
    );
    expect(ranOutOfMemory('warning: filtering not recognized by server\nfatal: Out of memory, realloc failed\n')).toBe(true);
    expect(
      ranOutOfMemory(
        'remote: fatal: Out of memory, malloc failed (tried to allocate 41956047 bytes)\nfatal: protocol error: bad pack header\n',
      ),
    ).toBe(false);
    expect(ranOutOfMemory("fatal: couldn't find remote ref refs/heads/out-of-memory\n")).toBe(false);
  });
});
