// grep over files that code in the sandbox swaps for FIFOs while the search runs: a FIFO is
// never opened, and a run held anyway (a swap after grep's look) is cut by the call's one
// deadline, the rest skipped with a diagnostic.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { grep } from '../../sandbox-image/toolbox/grep.ts';
import { createContext } from '../../sandbox-image/toolbox/toolbox-context.ts';
import { callTool, makeWorkspace, resultOf, type Workspace } from './toolbox-fixture.ts';

const which = (name: string) => execFileSync('bash', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();

/** The programs each engine is chosen with, the one its first pass runs, and an argument only that run has. */
const firstPass = {
  rg: { programs: ['rg', 'git', 'grep', 'xargs'], program: 'rg', marker: '--files-with-matches' },
  'git-grep': { programs: ['git', 'grep', 'xargs'], program: 'git', marker: '--untracked' },
  grep: { programs: ['grep', 'xargs'], program: 'grep', marker: '-r' },
} as const;

/** Every regular file under `root` whose name holds a newline becomes a FIFO (bash, for the wrappers). */
const swapNewlineNamesForFifos = (root: string) =>
  `while IFS= read -r -d '' f; do ${which('rm')} -f -- "$f"; ${which('mkfifo')} -- "$f"; done < <(${which('find')} ${root} -name $'*\\n*' -type f -print0)`;

type Answer = { engine: string; matches: Array<{ path: string; line: number }>; truncated: boolean; diagnostics?: string[] };

let workspace: Workspace;
const bins: string[] = [];
/** A PATH of the real `programs` but `program`, which is `script`. */
function pathWithWrapper(programs: readonly string[], program: string, script: string[]): string {
  const bin = mkdtempSync(path.join(tmpdir(), 'chamvi-path-'));
  bins.push(bin);
  for (const real of programs) {
    if (real !== program) symlinkSync(which(real), path.join(bin, real));
  }
  writeFileSync(path.join(bin, program), `${['#!/bin/bash', ...script].join('\n')}\n`, { mode: 0o755 });
  return bin;
}

beforeEach(() => {
  workspace = makeWorkspace();
  workspace.write({ 'src/a.txt': 'needle\n', 'one\nname.txt': 'needle\n', 'two\nname.txt': 'needle\n', 'three\nname.txt': 'needle\n' });
  workspace.git('init', '-q');
});
afterEach(() => workspace.cleanup());
afterAll(() => {
  for (const bin of bins) rmSync(bin, { recursive: true, force: true });
});

describe('grep over files swapped for FIFOs after the first pass', () => {
  it.each(['rg', 'git-grep', 'grep'] as const)(
    'engine %s answers at once with the other matches, never opening a FIFO',
    async (engine) => {
      const { programs, program, marker } = firstPass[engine];
      // The first pass as it is; then every name with a newline it found becomes a FIFO.
      const bin = pathWithWrapper(programs, program, [
        `case " $* " in *" ${marker} "*) ${which(program)} "$@"; code=$?; ${swapNewlineNamesForFifos(workspace.root)}; exit $code ;; esac`,
        `exec ${which(program)} "$@"`,
      ]);
      const begun = Date.now();
      const result = resultOf<Answer>(await callTool(workspace, 'grep', { pattern: 'needle' }, { env: { ...process.env, PATH: bin } }));
      expect(Date.now() - begun).toBeLessThan(10_000);
      expect(result).toEqual({ engine, matches: [{ path: 'src/a.txt', line: 1, text: 'needle' }], truncated: false });
    },
    30_000,
  );

  it.each(['rg', 'git-grep', 'grep'] as const)(
    'engine %s answers IO_ERROR for a path that is a FIFO, at once',
    async (engine) => {
      execFileSync('mkfifo', [path.join(workspace.root, 'pipe')]);
      const { programs, program } = firstPass[engine];
      const bin = pathWithWrapper(programs, program, [`exec ${which(program)} "$@"`]);
      const begun = Date.now();
      const response = await callTool(workspace, 'grep', { pattern: 'needle', path: 'pipe' }, { env: { ...process.env, PATH: bin } });
      expect(Date.now() - begun).toBeLessThan(10_000);
      expect(response).toMatchObject({
        ok: false,
        error: { code: 'IO_ERROR', message: expect.stringContaining('pipe is not a regular file') },
      });
    },
    30_000,
  );
});

describe('grep whose per-file runs are held past the call deadline', () => {
  const path0 = process.env.PATH;
  afterEach(() => {
    process.env.PATH = path0;
  });

  it('keeps the matches found, skips the files left with a diagnostic, and answers at the deadline', async () => {
    // rg as it is, but a lines run swaps its file for a FIFO first: the swap after grep's look,
    // which only the deadline can bound.
    const bin = pathWithWrapper(firstPass.rg.programs, 'rg', [
      `case " $* " in *" --line-number "*) ${swapNewlineNamesForFifos(workspace.root)} ;; esac`,
      `exec ${which('rg')} "$@"`,
    ]);
    process.env.PATH = bin;
    const begun = Date.now();
    const result = await grep(createContext({ root: workspace.root, home: workspace.home }), { pattern: 'needle' }, { timeoutMs: 2_000 });
    expect(Date.now() - begun).toBeLessThan(6_000);
    expect(result.engine).toBe('rg');
    // src/a.txt sorts after the names with newlines, whose own runs come last.
    expect(result.matches).toEqual([{ path: 'src/a.txt', line: 1, text: 'needle' }]);
    expect(result.truncated).toBe(true);
    expect(result.diagnostics).toEqual([expect.stringContaining('before it read all matching lines of 3 files that matched')]);
  }, 20_000);

  it('counts as unread only the files a stopped run had not printed, when one run holds them all', async () => {
    // Names without a newline share one xargs run; its rg finds one of them swapped for a FIFO
    // and prints the others' lines before the deadline stops it.
    workspace.write({ 'src/b.txt': 'needle\n', 'src/c.txt': 'needle\n', 'src/d.txt': 'needle\n' });
    const held = path.join(workspace.root, 'src/c.txt');
    const bin = pathWithWrapper(firstPass.rg.programs, 'rg', [
      `case " $* " in *" --line-number "*" ./src/c.txt "*) ${which('rm')} -f -- ${held}; ${which('mkfifo')} -- ${held} ;; esac`,
      `exec ${which('rg')} "$@"`,
    ]);
    process.env.PATH = bin;
    const result = await grep(createContext({ root: workspace.root, home: workspace.home }), { pattern: 'needle' }, { timeoutMs: 2_000 });
    expect(result.matches.map((match) => match.path)).toEqual(expect.arrayContaining(['src/a.txt', 'src/b.txt', 'src/d.txt']));
    expect(result.truncated).toBe(true);
    // src/c.txt, and the three names with a newline whose own runs were skipped.
    expect(result.diagnostics).toEqual([expect.stringContaining('before it read all matching lines of 4 files that matched')]);
  }, 20_000);
});
