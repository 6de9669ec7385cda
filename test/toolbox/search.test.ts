// grep (three engines chosen by PATH), glob and list_files: git-aware, sorted, bounded.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileGlob } from '../../sandbox-image/toolbox/contract/glob-pattern.ts';
import { forEachFile, MAX_NESTED_REPOSITORIES } from '../../sandbox-image/toolbox/file-listing.ts';
import { createContext } from '../../sandbox-image/toolbox/toolbox-context.ts';
import { ToolboxError } from '../../sandbox-image/toolbox/toolbox-error.ts';
import { alive, callTool, errorCodeOf, makeWorkspace, resultOf, TOOLBOX, type Workspace } from './toolbox-fixture.ts';
import { encodeRequest } from '../../sandbox-image/toolbox/contract/protocol.ts';

const which = (name: string) => execFileSync('bash', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();

/** A PATH holding only the named programs, so the toolbox sees exactly that engine set. */
function pathWith(programs: string[]): { env: NodeJS.ProcessEnv; cleanup(): void } {
  const directory = mkdtempSync(path.join(tmpdir(), 'chamvi-path-'));
  for (const program of programs) symlinkSync(which(program), path.join(directory, program));
  return { env: { ...process.env, PATH: directory }, cleanup: () => rmSync(directory, { recursive: true, force: true }) };
}

let workspace: Workspace;
// xargs is in every image (findutils): grep's second pass takes the paths from it.
const engines = {
  rg: pathWith(['rg', 'git', 'grep', 'xargs']),
  'git-grep': pathWith(['git', 'grep', 'xargs']),
  grep: pathWith(['grep', 'xargs']),
};
const grepWithoutXargs = pathWith(['grep']);

beforeAll(() => {
  workspace = makeWorkspace();
  workspace.write({
    'src/app.ts': 'export const needle = 1;\nconst other = 2;\n',
    'src/lib/util.ts': 'function util() {}\n// needle in a comment\n',
    '.hidden/config.json': '{"needle": true}\n',
    'docs/readme.md': 'no match here\n',
    'windows.txt': Buffer.from('\uFEFFneedle on line one\r\nsecond\r\nneedle again\r\n', 'utf8'),
    'image.bin': Buffer.from([0, 1, 2, 0x6e, 0x65, 0x65, 0x64, 0x6c, 0x65]),
    '.gitignore': 'ignored/\n*.log\n',
    'ignored/out.txt': 'needle ignored\n',
    'debug.log': 'needle log\n',
    'untracked.ts': 'const needle = "untracked";\n',
  });
  workspace.git('init', '-q');
  workspace.git('add', 'src', 'docs', 'windows.txt', '.gitignore', 'image.bin', '.hidden');
  workspace.git('commit', '-q', '-m', 'fixture');
});
afterAll(() => {
  workspace.cleanup();
  for (const engine of Object.values(engines)) engine.cleanup();
  grepWithoutXargs.cleanup();
});

describe('grep', () => {
  const expected = [
    { path: '.hidden/config.json', line: 1, text: '{"needle": true}' },
    { path: 'src/app.ts', line: 1, text: 'export const needle = 1;' },
    { path: 'src/lib/util.ts', line: 2, text: '// needle in a comment' },
    { path: 'untracked.ts', line: 1, text: 'const needle = "untracked";' },
    { path: 'windows.txt', line: 1, text: 'needle on line one' },
    { path: 'windows.txt', line: 3, text: 'needle again' },
  ];

  it.each(['rg', 'git-grep', 'grep'] as const)(
    'engine %s finds tracked, untracked and hidden matches, skipping .git and binaries',
    async (engine) => {
      const response = await callTool(workspace, 'grep', { pattern: 'need+le' }, { env: engines[engine].env });
      const result = resultOf<{ engine: string; matches: unknown[]; truncated: boolean }>(response);
      expect(result.engine).toBe(engine);
      // Plain grep (no git on PATH) cannot read .gitignore: compare on the files all three see.
      const matches = result.matches.filter((match) => !['ignored/out.txt', 'debug.log'].includes((match as { path: string }).path));
      expect(matches).toEqual(expected);
      expect(result.truncated).toBe(false);
    },
  );

  it('finds the same matches without xargs, giving the second pass the paths as arguments', async () => {
    const result = resultOf<{ engine: string; matches: Array<{ path: string }> }>(
      await callTool(workspace, 'grep', { pattern: 'need+le' }, { env: grepWithoutXargs.env }),
    );
    expect(result.engine).toBe('grep');
    expect(result.matches.filter((match) => !['ignored/out.txt', 'debug.log'].includes(match.path))).toEqual(expected);
  });

  it.each(['rg', 'git-grep', 'grep'] as const)(
    'engine %s reports a match in a file whose name is not UTF-8, which counts once toward the limit',
    async (engine) => {
      const names = makeWorkspace();
      try {
        // caf\xe9.txt: Latin-1, not UTF-8; the result shows it with U+FFFD, as before.
        writeFileSync(Buffer.concat([Buffer.from(`${names.root}/caf`), Buffer.of(0xe9), Buffer.from('.txt')]), 'needle\n');
        names.write({ 'crlf.txt': 'end;\r\nneedle;\r\n', 'zz.txt': 'needle\n' });
        names.git('init', '-q');
        const result = resultOf<{ matches: Array<{ path: string; line: number }>; truncated: boolean }>(
          await callTool(names, 'grep', { pattern: 'needle', limit: 2 }, { env: engines[engine].env }),
        );
        expect(result.matches.map((match) => `${match.path}:${match.line}`)).toEqual(['caf\uFFFD.txt:1', 'crlf.txt:2']);
        expect(result.truncated).toBe(true);
      } finally {
        names.cleanup();
      }
    },
  );

  it.each(['rg', 'git-grep', 'grep'] as const)(
    'engine %s reports a match in a file whose name holds a newline under that name, never as a line of the file its tail names',
    async (engine) => {
      const names = makeWorkspace();
      try {
        // Each name's tail spells src/auth.ts as an engine prints it (rg and grep under `.`:
        // `./src/auth.ts`; git grep: `src/auth.ts`), and the line after it reads like a match there.
        names.write({
          'src/auth.ts': 'needle real\nother\n',
          'evil\n./src/auth.ts': 'x\nx\nx\nx\nneedle FAKE2\n',
          'evil\nsrc/auth.ts': 'x\nx\nneedle FAKE\n',
        });
        names.git('init', '-q');
        for (const env of engine === 'grep' ? [engines.grep.env, grepWithoutXargs.env] : [engines[engine].env]) {
          const result = resultOf<{ engine: string; matches: Array<{ path: string; line: number; text: string }>; truncated: boolean }>(
            await callTool(names, 'grep', { pattern: 'needle' }, { env }),
          );
          expect(result.engine).toBe(engine);
          expect(result.matches).toEqual([
            { path: 'evil\n./src/auth.ts', line: 5, text: 'needle FAKE2' },
            { path: 'evil\nsrc/auth.ts', line: 3, text: 'needle FAKE' },
            { path: 'src/auth.ts', line: 1, text: 'needle real' },
          ]);
          expect(result.truncated).toBe(false);
        }
      } finally {
        names.cleanup();
      }
    },
  );

  it.each(['rg', 'git-grep'] as const)('engine %s leaves git-ignored files out unless includeIgnored', async (engine) => {
    const plain = resultOf<{ matches: Array<{ path: string }> }>(
      await callTool(workspace, 'grep', { pattern: 'needle' }, { env: engines[engine].env }),
    );
    expect(plain.matches.map((match) => match.path)).not.toContain('ignored/out.txt');
    const all = resultOf<{ matches: Array<{ path: string }> }>(
      await callTool(workspace, 'grep', { pattern: 'needle', includeIgnored: true }, { env: engines[engine].env }),
    );
    expect(all.matches.map((match) => match.path)).toEqual(expect.arrayContaining(['ignored/out.txt', 'debug.log']));
  });

  it('searches under a path, case-insensitively when asked, with line numbers that agree with read_file', async () => {
    const result = resultOf<{ matches: Array<{ path: string; line: number }> }>(
      await callTool(workspace, 'grep', { pattern: 'NEEDLE', path: 'src', ignoreCase: true }),
    );
    expect(result.matches.map((match) => match.path)).toEqual(['src/app.ts', 'src/lib/util.ts']);
    const window = resultOf<{ content: string }>(await callTool(workspace, 'read_file', { path: 'src/lib/util.ts', offset: 2, limit: 1 }));
    expect(window.content).toContain('needle');
  });

  it('bounds the matches (default 100, limit) and cuts lines at 500 characters', async () => {
    const many = makeWorkspace();
    try {
      many.write({ 'many.txt': 'hit\n'.repeat(700), 'wide.txt': `hit${'w'.repeat(2_000)}\n` });
      const defaults = resultOf<{ matches: unknown[]; truncated: boolean }>(
        await callTool(many, 'grep', { pattern: 'hit', path: 'many.txt' }),
      );
      expect(defaults.matches).toHaveLength(100);
      expect(defaults.truncated).toBe(true);
      const limited = resultOf<{ matches: unknown[] }>(await callTool(many, 'grep', { pattern: 'hit', limit: 500 }));
      expect(limited.matches).toHaveLength(500);
      expect(errorCodeOf(await callTool(many, 'grep', { pattern: 'hit', limit: 501 }))).toBe('INVALID_INPUT');
      const wide = resultOf<{ matches: Array<{ text: string }> }>(await callTool(many, 'grep', { pattern: 'hitw', path: 'wide.txt' }));
      expect(wide.matches[0]?.text).toHaveLength(500);
    } finally {
      many.cleanup();
    }
  });

  it('reports a bad pattern as INVALID_INPUT', async () => {
    expect(errorCodeOf(await callTool(workspace, 'grep', { pattern: '(' }))).toBe('INVALID_INPUT');
  });

  it.each(['rg', 'git-grep', 'grep'] as const)('engine %s answers NOT_FOUND for a path that does not exist', async (engine) => {
    const response = await callTool(workspace, 'grep', { pattern: 'needle', path: 'no/such/dir' }, { env: engines[engine].env });
    expect(response).toMatchObject({
      ok: false,
      error: { code: 'NOT_FOUND', message: expect.stringContaining('no/such/dir does not exist') },
    });
    expect(errorCodeOf(await callTool(workspace, 'grep', { pattern: 'needle', path: 'src/absent.ts' }, { env: engines[engine].env }))).toBe(
      'NOT_FOUND',
    );
  });

  describe('when there are more matches than the limit', () => {
    let wide: Workspace;
    beforeAll(() => {
      wide = makeWorkspace();
      const files: Record<string, string> = {};
      for (let directory = 1; directory <= 8; directory += 1) {
        for (let file = 1; file <= 200; file += 1) files[`d${directory}/f${file}.txt`] = 'hit\nno\nhit again\n';
      }
      wide.write(files);
      wide.git('init', '-q');
    });
    afterAll(() => wide.cleanup());

    it.each(['rg', 'git-grep', 'grep'] as const)('engine %s keeps the first by path, then line, on every call', async (engine) => {
      for (let call = 0; call < 5; call += 1) {
        const result = resultOf<{ matches: Array<{ path: string; line: number }>; truncated: boolean }>(
          await callTool(wide, 'grep', { pattern: 'hit', limit: 3 }, { env: engines[engine].env }),
        );
        expect(result.matches.map((match) => `${match.path}:${match.line}`)).toEqual(['d1/f1.txt:1', 'd1/f1.txt:3', 'd1/f10.txt:1']);
        expect(result.truncated).toBe(true);
      }
    });

    it('keeps the first files in path order when each holds one match', async () => {
      for (let call = 0; call < 5; call += 1) {
        const result = resultOf<{ matches: Array<{ path: string }>; truncated: boolean }>(
          await callTool(wide, 'grep', { pattern: 'again', limit: 3 }),
        );
        expect(result.matches.map((match) => match.path)).toEqual(['d1/f1.txt', 'd1/f10.txt', 'd1/f100.txt']);
      }
    });

    it('says truncated when one file alone holds more matches than the limit', async () => {
      const result = resultOf<{ matches: unknown[]; truncated: boolean }>(
        await callTool(wide, 'grep', { pattern: 'hit', path: 'd1/f1.txt', limit: 2 }),
      );
      expect(result).toMatchObject({ matches: [{ line: 1 }, { line: 3 }], truncated: false });
      const one = resultOf<{ matches: unknown[]; truncated: boolean }>(
        await callTool(wide, 'grep', { pattern: 'hit', path: 'd1/f1.txt', limit: 1 }),
      );
      expect(one).toMatchObject({ matches: [{ line: 1 }], truncated: true });
    });
  });

  describe('in repositories nested in the workspace', () => {
    let nested: Workspace;
    let outside: string;
    beforeAll(() => {
      outside = mkdtempSync(path.join(tmpdir(), 'chamvi-outside-'));
      writeFileSync(path.join(outside, 'secret.txt'), 'needle outside\n');
      nested = makeWorkspace();
      nested.write({ 'top.txt': 'needle\n', 'zz.txt': 'needle\n', '.gitignore': '*.log\n' });
      nested.git('init', '-q');
      // An untracked clone with ignore rules of its own; the outer `*.log` does not reach into it.
      nested.write({
        'vendor/lib/a.txt': 'needle\n',
        'vendor/lib/x.log': 'needle\n',
        'vendor/lib/.gitignore': 'build/\n',
        'vendor/lib/build/out.txt': 'needle\n',
        'vendor/lib/image.bin': Buffer.from('needle\0\n'),
        'vendor/lib/.env': 'TOKEN=needle\n',
      });
      writeFileSync(Buffer.concat([Buffer.from(`${nested.root}/vendor/lib/caf`), Buffer.of(0xe9), Buffer.from('.txt')]), 'needle\n');
      symlinkSync(path.join(outside, 'secret.txt'), path.join(nested.root, 'vendor/lib/link.txt'));
      nested.git('-C', 'vendor/lib', 'init', '-q');
      // A submodule: the outer index holds it as a gitlink.
      nested.write({ 'sub/s.txt': 'no\nneedle\n' });
      nested.git('-C', 'sub', 'init', '-q');
      nested.git('-C', 'sub', 'add', 's.txt');
      nested.git('-C', 'sub', 'commit', '-q', '-m', 'sub');
      nested.git('add', 'top.txt', 'zz.txt', '.gitignore', 'sub');
    });
    afterAll(() => {
      nested.cleanup();
      rmSync(outside, { recursive: true, force: true });
    });

    const found = async (engine: keyof typeof engines, input: Record<string, unknown>) => {
      const result = resultOf<{ engine: string; matches: Array<{ path: string; line: number }>; truncated: boolean }>(
        await callTool(nested, 'grep', { pattern: 'needle', ...input }, { env: engines[engine].env }),
      );
      expect(result.engine).toBe(engine);
      return { lines: result.matches.map((match) => `${match.path}:${match.line}`), truncated: result.truncated };
    };

    it.each(['rg', 'git-grep'] as const)(
      "engine %s finds matches inside them with each one's own ignore rules, in files list_files lists",
      async (engine) => {
        const { lines, truncated } = await found(engine, {});
        // Not build/ (the clone ignores it), the binary, the credential file or the symlink out.
        expect(lines).toEqual([
          'sub/s.txt:2',
          'top.txt:1',
          'vendor/lib/a.txt:1',
          'vendor/lib/caf\uFFFD.txt:1',
          'vendor/lib/x.log:1',
          'zz.txt:1',
        ]);
        expect(truncated).toBe(false);
        // list_files leaves out the name that is not UTF-8 (its check that a file exists looks
        // for the name as shown); the others are all files it lists.
        const listed = resultOf<{ files: string[] }>(await callTool(nested, 'list_files', {})).files;
        const shown = lines.filter((line) => !line.includes('\uFFFD')).map((line) => line.slice(0, line.lastIndexOf(':')));
        expect(listed).toEqual(expect.arrayContaining(shown));
      },
    );

    it.each(['rg', 'git-grep'] as const)('engine %s searches under a path inside one, and its ignored files when asked', async (engine) => {
      expect((await found(engine, { path: 'vendor/lib' })).lines).toEqual([
        'vendor/lib/a.txt:1',
        'vendor/lib/caf\uFFFD.txt:1',
        'vendor/lib/x.log:1',
      ]);
      expect((await found(engine, { path: 'sub/s.txt' })).lines).toEqual(['sub/s.txt:2']);
      expect((await found(engine, { path: 'vendor', includeIgnored: true })).lines).toContain('vendor/lib/build/out.txt:1');
    });

    it.each(['rg', 'git-grep'] as const)(
      'engine %s keeps the first by path across the outer repository and nested ones',
      async (engine) => {
        for (let call = 0; call < 2; call += 1) {
          expect(await found(engine, { limit: 3 })).toEqual({ lines: ['sub/s.txt:2', 'top.txt:1', 'vendor/lib/a.txt:1'], truncated: true });
        }
      },
    );
  });

  describe('in a nested clone whose tracked files the worktree replaced', () => {
    let swapped: Workspace;
    let outside: string;
    beforeAll(() => {
      outside = mkdtempSync(path.join(tmpdir(), 'chamvi-outside-'));
      writeFileSync(path.join(outside, 'secret.txt'), 'needle OUTSIDE\n');
      swapped = makeWorkspace();
      swapped.write({ 'top.txt': 'needle\n' });
      swapped.git('init', '-q');
      swapped.write({
        'vendor/lib/.gitignore': '*.log\n',
        'vendor/lib/a.txt': 'needle\n',
        'vendor/lib/data': 'x\n',
        'vendor/lib/dir2': 'x\n',
        'vendor/lib/cred': 'x\n',
      });
      swapped.git('-C', 'vendor/lib', 'init', '-q');
      swapped.git('-C', 'vendor/lib', 'add', '.');
      swapped.git('-C', 'vendor/lib', 'commit', '-q', '-m', 'lib');
      // Uncommitted: `data` a symlink to a directory outside, `dir2` a directory of ignored files
      // and a repository of its own, `cred` a directory of credential files. The clone's index
      // still names all three as files.
      for (const name of ['data', 'dir2', 'cred']) rmSync(path.join(swapped.root, 'vendor/lib', name));
      symlinkSync(outside, path.join(swapped.root, 'vendor/lib/data'));
      swapped.write({
        'vendor/lib/dir2/ignored.log': 'needle IGNORED\n',
        'vendor/lib/dir2/deeper/x.log': 'needle IGNORED2\n',
        'vendor/lib/dir2/plain.txt': 'needle plain\n',
        'vendor/lib/dir2/inner/y.txt': 'needle inner\n',
        'vendor/lib/cred/.env': 'TOKEN=needle\n',
        'vendor/lib/cred/server.pem': 'needle PEM\n',
      });
      swapped.git('-C', 'vendor/lib/dir2/inner', 'init', '-q');
    });
    afterAll(() => {
      swapped.cleanup();
      rmSync(outside, { recursive: true, force: true });
    });

    it('rg and git grep find the same files, each one list_files lists: none under a name that became a directory', async () => {
      const lines = async (engine: keyof typeof engines) => {
        const result = resultOf<{ engine: string; matches: Array<{ path: string; line: number }> }>(
          await callTool(swapped, 'grep', { pattern: 'needle' }, { env: engines[engine].env }),
        );
        expect(result.engine).toBe(engine);
        return result.matches.map((match) => `${match.path}:${match.line}`);
      };
      const expected = ['top.txt:1', 'vendor/lib/a.txt:1', 'vendor/lib/dir2/inner/y.txt:1', 'vendor/lib/dir2/plain.txt:1'];
      expect(await lines('rg')).toEqual(expected);
      expect(await lines('git-grep')).toEqual(expected);
      const listed = resultOf<{ files: string[] }>(await callTool(swapped, 'list_files', {})).files;
      expect(listed).toEqual(expect.arrayContaining(expected.map((line) => line.slice(0, line.lastIndexOf(':')))));
    });
  });

  describe('when a nested repository is slow to list', () => {
    let slow: Workspace;
    let bin: string;
    const started = () => path.join(bin, 'slow-listing.pid');
    const listings = () => path.join(bin, 'listings.log');
    beforeAll(() => {
      slow = makeWorkspace();
      slow.write({ 'top.txt': 'needle\n', 'vendor/lib/a.txt': 'needle\n' });
      slow.git('init', '-q');
      slow.git('-C', 'vendor/lib', 'init', '-q');
      bin = mkdtempSync(path.join(tmpdir(), 'chamvi-path-'));
      for (const program of ['grep', 'xargs', 'sleep']) symlinkSync(which(program), path.join(bin, program));
      // git as it is, but the nested clone's `ls-files` hangs, as on a huge untracked tree.
      const git = [
        '#!/bin/bash',
        `if [[ "$1" == ls-files ]]; then echo "$GIT_DIR" >> ${listings()}; fi`,
        `if [[ "$1" == ls-files && "$GIT_DIR" == */vendor/lib/.git ]]; then echo $$ > ${started()}; exec sleep 30; fi`,
        `exec ${which('git')} "$@"`,
      ].join('\n');
      writeFileSync(path.join(bin, 'git'), `${git}\n`, { mode: 0o755 });
    });
    afterAll(() => {
      slow.cleanup();
      rmSync(bin, { recursive: true, force: true });
    });
    const env = () => ({ ...process.env, PATH: bin, CHAMVI_GREP_NESTED_DEADLINE_MS: '1000' });

    it("answers with the outer repository's matches past the nested deadline, says what it left out, and stops the listing", async () => {
      rmSync(started(), { force: true });
      const begun = Date.now();
      const result = resultOf<{ engine: string; matches: Array<{ path: string }>; truncated: boolean; diagnostics?: string[] }>(
        await callTool(slow, 'grep', { pattern: 'needle' }, { env: env() }),
      );
      expect(Date.now() - begun).toBeLessThan(10_000);
      expect(result.engine).toBe('git-grep');
      expect(result.matches.map((match) => match.path)).toEqual(['top.txt']);
      expect(result.truncated).toBe(true);
      expect(result.diagnostics).toEqual([expect.stringContaining('nested in the workspace were not fully searched')]);
      // The hung listing was killed when the call answered, not left to run out its 30 s.
      const listing = Number(readFileSync(started(), 'utf8'));
      for (let attempt = 0; attempt < 50 && alive(listing); attempt += 1) await new Promise((resolve) => setTimeout(resolve, 20));
      try {
        expect(alive(listing)).toBe(false);
      } finally {
        if (alive(listing)) process.kill(listing, 'SIGKILL');
      }
    });

    it('answers a bad pattern before listing anything', async () => {
      rmSync(listings(), { force: true });
      const begun = Date.now();
      expect(errorCodeOf(await callTool(slow, 'grep', { pattern: '(' }, { env: env() }))).toBe('INVALID_INPUT');
      expect(Date.now() - begun).toBeLessThan(10_000);
      expect(existsSync(listings())).toBe(false);
    });
  });

  describe('when the nested deadline passes in a repository with no nested one', () => {
    let plain: Workspace;
    let bin: string;
    const started = () => path.join(bin, 'slow-listing.pid');
    beforeAll(() => {
      plain = makeWorkspace();
      plain.write({ 'top.txt': 'needle\n', 'src/a.txt': 'needle\n' });
      plain.git('init', '-q');
      bin = mkdtempSync(path.join(tmpdir(), 'chamvi-path-'));
      for (const program of ['grep', 'xargs', 'sleep']) symlinkSync(which(program), path.join(bin, program));
      // git as it is, but `ls-files` hangs, as on a huge outer repository; git grep is not slowed.
      const git = [
        '#!/bin/bash',
        `if [[ "$1" == ls-files ]]; then echo $$ > ${started()}; exec sleep 30; fi`,
        `exec ${which('git')} "$@"`,
      ].join('\n');
      writeFileSync(path.join(bin, 'git'), `${git}\n`, { mode: 0o755 });
    });
    afterAll(() => {
      const listing = existsSync(started()) ? Number(readFileSync(started(), 'utf8')) : 0;
      if (listing > 0 && alive(listing)) process.kill(listing, 'SIGKILL');
      plain.cleanup();
      rmSync(bin, { recursive: true, force: true });
    });
    type Answer = { engine: string; matches: Array<{ path: string }>; truncated: boolean; diagnostics?: string[] };

    it('says it could not tell whether nested repositories exist when the listing did not finish, not that some went unsearched', async () => {
      const result = resultOf<Answer>(
        await callTool(plain, 'grep', { pattern: 'needle' }, { env: { ...process.env, PATH: bin, CHAMVI_GREP_NESTED_DEADLINE_MS: '1' } }),
      );
      expect(result.engine).toBe('git-grep');
      expect(result.matches.map((match) => match.path)).toEqual(['src/a.txt', 'top.txt']);
      // Nested repositories there may be, unsearched: truncated, as the contract says of a part not searched.
      expect(result.truncated).toBe(true);
      expect(result.diagnostics).toEqual([expect.stringMatching(/^could not tell whether nested repositories exist/)]);
    });

    it('with real git and a 1 ms deadline says nothing of nested repositories unless the listing did not finish', async () => {
      const result = resultOf<Answer>(
        await callTool(plain, 'grep', { pattern: 'needle' }, { env: { ...engines['git-grep'].env, CHAMVI_GREP_NESTED_DEADLINE_MS: '1' } }),
      );
      expect(result.engine).toBe('git-grep');
      expect(result.matches.map((match) => match.path)).toEqual(['src/a.txt', 'top.txt']);
      // Whether git lists the files within 1 ms is up to the machine; either answer is true.
      if (result.diagnostics === undefined) expect(result.truncated).toBe(false);
      else expect(result).toMatchObject({ truncated: true, diagnostics: [expect.stringMatching(/^could not tell whether/)] });
    });
  });

  describe('anchors where read_file shows lines begin and end', () => {
    let lines: Workspace;
    beforeAll(() => {
      lines = makeWorkspace();
      lines.write({
        'crlf.ts': Buffer.from('\uFEFFimport x from "y";\r\nreturn x;\r\n', 'utf8'),
        'lf.ts': 'import z;\nreturn x;\nconst price = "$5";\n',
      });
      lines.git('init', '-q');
    });
    afterAll(() => lines.cleanup());

    const found = async (engine: keyof typeof engines, pattern: string) =>
      resultOf<{ matches: Array<{ path: string; line: number }> }>(
        await callTool(lines, 'grep', { pattern }, { env: engines[engine].env }),
      ).matches.map((match) => `${match.path}:${match.line}`);

    it.each(['rg', 'git-grep', 'grep'] as const)('engine %s: $ matches before \\r\\n and ^ after a byte order mark', async (engine) => {
      expect(await found(engine, 'x;$')).toEqual(['crlf.ts:2', 'lf.ts:2']);
      expect(await found(engine, '^import')).toEqual(['crlf.ts:1', 'lf.ts:1']);
      expect(await found(engine, '^return x;$')).toEqual(['crlf.ts:2', 'lf.ts:2']);
      // A $ in a bracket or escaped is a dollar sign, not an anchor.
      expect(await found(engine, '"[$]5')).toEqual(['lf.ts:3']);
      expect(await found(engine, '"\\$5')).toEqual(['lf.ts:3']);
    });

    // git grep refuses a quantifier after an anchor (glibc's regcomp); rg and GNU grep take it.
    it.each(['rg', 'grep'] as const)('engine %s: a quantified ^ stays optional, as rg has it', async (engine) => {
      expect(await found(engine, '^*x')).toEqual(['crlf.ts:1', 'crlf.ts:2', 'lf.ts:2']);
      expect(await found(engine, '^?z')).toEqual(['lf.ts:1']);
    });
  });
});

describe('list_files and glob', () => {
  it('lists tracked and untracked files, sorted, without git-ignored ones or .git', async () => {
    const result = resultOf<{ files: string[]; truncated: boolean }>(await callTool(workspace, 'list_files', {}));
    expect(result.files).toEqual([...result.files].sort());
    expect(result.files).toEqual(expect.arrayContaining(['.gitignore', '.hidden/config.json', 'src/app.ts', 'untracked.ts']));
    expect(result.files).not.toContain('ignored/out.txt');
    expect(result.files).not.toContain('debug.log');
    expect(result.files.some((file) => file.startsWith('.git/'))).toBe(false);
  });

  it('includes git-ignored files with includeIgnored, and lists under a path', async () => {
    const all = resultOf<{ files: string[] }>(await callTool(workspace, 'list_files', { includeIgnored: true }));
    expect(all.files).toEqual(expect.arrayContaining(['ignored/out.txt', 'debug.log']));
    const src = resultOf<{ files: string[] }>(await callTool(workspace, 'list_files', { path: 'src' }));
    expect(src.files).toEqual(['src/app.ts', 'src/lib/util.ts']);
  });

  it('bounds the listing and says truncated', async () => {
    const result = resultOf<{ files: string[]; truncated: boolean }>(await callTool(workspace, 'list_files', { limit: 2 }));
    expect(result).toEqual({ files: ['.gitignore', '.hidden/config.json'], truncated: true });
  });

  it('walks a directory that is not a git repository', async () => {
    const plain = makeWorkspace();
    try {
      plain.write({ 'b.txt': '', 'a/c.txt': '', '.git-not/x': '' });
      expect(resultOf(await callTool(plain, 'list_files', {}))).toEqual({ files: ['.git-not/x', 'a/c.txt', 'b.txt'], truncated: false });
    } finally {
      plain.cleanup();
    }
  });

  it('matches ** across directories and * within one, sorted', async () => {
    expect(resultOf(await callTool(workspace, 'glob', { pattern: '**/*.ts' }))).toEqual({
      files: ['src/app.ts', 'src/lib/util.ts', 'untracked.ts'],
      truncated: false,
    });
    expect(resultOf(await callTool(workspace, 'glob', { pattern: '*.ts', path: 'src' }))).toEqual({
      files: ['src/app.ts'],
      truncated: false,
    });
    expect(resultOf(await callTool(workspace, 'glob', { pattern: '**/*.{json,md}' }))).toEqual({
      files: ['.hidden/config.json', 'docs/readme.md'],
      truncated: false,
    });
    expect(resultOf(await callTool(workspace, 'glob', { pattern: '**/*.txt', includeIgnored: true, limit: 1 }))).toEqual({
      files: ['ignored/out.txt'],
      truncated: true,
    });
  });

  describe('in a repository nested in the workspace', () => {
    let nested: Workspace;
    beforeAll(() => {
      nested = makeWorkspace();
      nested.write({ 'top.py': '', '.gitignore': '*.log\n' });
      nested.git('init', '-q');
      // An untracked clone: the outer `git ls-files` names it only as `vendor/lib/`.
      nested.write({
        'vendor/lib/a.py': '',
        'vendor/lib/pkg/b.py': '',
        'vendor/lib/.gitignore': 'build/\n',
        'vendor/lib/build/out.py': '',
      });
      nested.git('-C', 'vendor/lib', 'init', '-q');
      // A submodule: the outer index holds it as a gitlink, `sub`.
      nested.write({ 'sub/s.py': '' });
      nested.git('-C', 'sub', 'init', '-q');
      nested.git('-C', 'sub', 'add', 's.py');
      nested.git('-C', 'sub', 'commit', '-q', '-m', 'sub');
      nested.git('add', 'top.py', '.gitignore', 'sub');
    });
    afterAll(() => nested.cleanup());

    it('lists the files inside it, with its own ignore rules, and never a directory', async () => {
      const all = resultOf<{ files: string[] }>(await callTool(nested, 'list_files', {}));
      expect(all.files).toEqual(['.gitignore', 'sub/s.py', 'top.py', 'vendor/lib/.gitignore', 'vendor/lib/a.py', 'vendor/lib/pkg/b.py']);
      expect(resultOf(await callTool(nested, 'list_files', { path: 'vendor/lib' }))).toEqual({
        files: ['vendor/lib/.gitignore', 'vendor/lib/a.py', 'vendor/lib/pkg/b.py'],
        truncated: false,
      });
      expect(resultOf(await callTool(nested, 'list_files', { path: 'vendor/lib/pkg' }))).toEqual({
        files: ['vendor/lib/pkg/b.py'],
        truncated: false,
      });
      const ignored = resultOf<{ files: string[] }>(await callTool(nested, 'list_files', { path: 'vendor', includeIgnored: true }));
      expect(ignored.files).toContain('vendor/lib/build/out.py');
    });

    it('globs inside it', async () => {
      expect(resultOf(await callTool(nested, 'glob', { pattern: '**/*.py' }))).toEqual({
        files: ['sub/s.py', 'top.py', 'vendor/lib/a.py', 'vendor/lib/pkg/b.py'],
        truncated: false,
      });
    });
  });

  it("lists an untracked file named like a gitlink entry (`160000 0 0\t..`) as a file, never the workspace's parent", async () => {
    const planted = makeWorkspace();
    // A sibling of the workspace, what `..` would list.
    const parentFile = path.join(planted.root, '..', 'payroll-2026.xlsx');
    try {
      writeFileSync(parentFile, 'needle\n');
      planted.write({ 'top.txt': 'needle\n', 'vendor/lib/a.txt': 'needle nested\n' });
      planted.git('init', '-q');
      planted.git('-C', 'vendor/lib', 'init', '-q');
      // The file tools alone can plant the name: no bash needed.
      resultOf(await callTool(planted, 'write_file', { path: '160000 0 0\t..', content: '' }));
      const listed = resultOf<{ files: string[] }>(await callTool(planted, 'list_files', {})).files;
      expect(listed).toEqual(['160000 0 0\t..', 'top.txt', 'vendor/lib/a.txt']);
      expect(resultOf(await callTool(planted, 'glob', { pattern: '**/*.xlsx' }))).toEqual({ files: [], truncated: false });
      const found = resultOf<{ matches: Array<{ path: string }>; truncated: boolean }>(
        await callTool(planted, 'grep', { pattern: 'needle' }, { env: engines['git-grep'].env }),
      );
      expect(found).toMatchObject({ matches: [{ path: 'top.txt' }, { path: 'vendor/lib/a.txt' }], truncated: false });
    } finally {
      planted.cleanup();
    }
  });

  it('does not enter a gitlink whose parent directory became a symlink out of the workspace', async () => {
    const linked = makeWorkspace();
    const elsewhere = mkdtempSync(path.join(tmpdir(), 'chamvi-elsewhere-'));
    try {
      mkdirSync(path.join(elsewhere, 'sub'));
      writeFileSync(path.join(elsewhere, 'sub', 'secret.txt'), '');
      linked.write({ 'top.txt': '' });
      linked.git('init', '-q');
      // The index names `mods/sub` a submodule; the worktree has `mods` as a symlink out.
      linked.git('update-index', '--add', '--cacheinfo', `160000,${'1'.repeat(40)},mods/sub`);
      symlinkSync(elsewhere, path.join(linked.root, 'mods'));
      const listed = resultOf<{ files: string[] }>(await callTool(linked, 'list_files', {})).files;
      expect(listed).not.toContain('mods/sub/secret.txt');
      expect(listed).toContain('top.txt');
    } finally {
      linked.cleanup();
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it("stops a walk at the listing's deadline", async () => {
    const deep = makeWorkspace();
    try {
      const files: Record<string, string> = {};
      for (let index = 0; index < 300; index += 1) files[`d${index}/e/f.txt`] = '';
      deep.write(files);
      const context = createContext({ root: deep.root, home: deep.home });
      const listed: string[] = [];
      const walk = forEachFile(context, '', false, (file) => listed.push(file.path), { timeoutMs: 1 });
      await expect(walk).rejects.toSatisfy((error) => ToolboxError.isInstance(error) && error.code === 'TIMEOUT');
      expect(listed.length).toBeLessThan(300);
    } finally {
      deep.cleanup();
    }
  });

  it("lists a nested repository's own directory even when its core.worktree names another", async () => {
    const pointed = makeWorkspace();
    const elsewhere = mkdtempSync(path.join(tmpdir(), 'chamvi-elsewhere-'));
    try {
      writeFileSync(path.join(elsewhere, 'outside.txt'), '');
      pointed.write({ 'top.txt': '', 'vendor/wt/own.txt': '' });
      pointed.git('init', '-q');
      pointed.git('-C', 'vendor/wt', 'init', '-q');
      pointed.git('-C', 'vendor/wt', 'config', 'core.worktree', elsewhere);
      expect(resultOf(await callTool(pointed, 'list_files', {}))).toEqual({ files: ['top.txt', 'vendor/wt/own.txt'], truncated: false });
      expect(resultOf(await callTool(pointed, 'list_files', { path: 'vendor/wt' }))).toEqual({
        files: ['vendor/wt/own.txt'],
        truncated: false,
      });
    } finally {
      pointed.cleanup();
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  describe(`past ${MAX_NESTED_REPOSITORIES} nested repositories`, () => {
    let many: Workspace;
    const count = MAX_NESTED_REPOSITORIES + 6;
    const names = Array.from({ length: count }, (_, index) => `r${String(index).padStart(3, '0')}`);
    beforeAll(() => {
      many = makeWorkspace();
      for (const name of names) {
        many.write({ [`${name}/a.txt`]: 'needle\n', [`${name}/.gitignore`]: 'x.log\n', [`${name}/x.log`]: 'needle\n' });
      }
      many.git('init', '-q');
      for (const name of names) many.git('-C', name, 'init', '-q');
    });
    afterAll(() => many.cleanup());

    it(`asks git about at most ${MAX_NESTED_REPOSITORIES} per call and walks the rest`, async () => {
      const result = resultOf<{ files: string[]; truncated: boolean }>(await callTool(many, 'list_files', {}));
      expect(result.truncated).toBe(false);
      expect(result.files.filter((file) => file.endsWith('/a.txt'))).toHaveLength(count);
      // A walked repository's ignore rules are not read: its ignored file is listed.
      expect(result.files.filter((file) => file.endsWith('/x.log'))).toEqual(
        names.slice(MAX_NESTED_REPOSITORIES).map((name) => `${name}/x.log`),
      );
    });

    it('grep with git grep searches the files the listing lists in them', async () => {
      const result = resultOf<{ matches: Array<{ path: string }>; truncated: boolean }>(
        await callTool(many, 'grep', { pattern: 'needle', limit: 500 }, { env: engines['git-grep'].env }),
      );
      const listed = resultOf<{ files: string[] }>(await callTool(many, 'list_files', {})).files;
      expect(result.matches.map((match) => match.path)).toEqual(listed.filter((file) => !file.endsWith('/.gitignore')));
      expect(result.truncated).toBe(false);
    });
  });

  it('takes a backslash as an escape, and a pattern also names the path it spells', async () => {
    const routes = makeWorkspace();
    try {
      routes.write({ 'app/[id]/page.tsx': '', 'app/i/page.tsx': '', 'app/x/page.tsx': '' });
      expect(resultOf(await callTool(routes, 'glob', { pattern: 'app/\\[id\\]/page.tsx' }))).toEqual({
        files: ['app/[id]/page.tsx'],
        truncated: false,
      });
      expect(resultOf(await callTool(routes, 'glob', { pattern: 'app/[id]/page.tsx' }))).toEqual({
        files: ['app/[id]/page.tsx', 'app/i/page.tsx'],
        truncated: false,
      });
      expect(errorCodeOf(await callTool(routes, 'glob', { pattern: 'app\\' }))).toBe('INVALID_INPUT');
    } finally {
      routes.cleanup();
    }
  });

  it('compiles globs', () => {
    expect(compileGlob('**/*.ts').test('a.ts')).toBe(true);
    expect(compileGlob('**/*.ts').test('a/b/c.ts')).toBe(true);
    expect(compileGlob('src/*.ts').test('src/a/b.ts')).toBe(false);
    expect(compileGlob('src/**').test('src/a/b.ts')).toBe(true);
    expect(compileGlob('file?.[ch]').test('file1.c')).toBe(true);
    expect(compileGlob('a.b').test('axb')).toBe(false);
  });
});

describe('grep and credential files', () => {
  it('leaves credential files out of results and refuses them as a path', async () => {
    const secrets = makeWorkspace();
    try {
      secrets.write({ '.env': 'TOKEN=needle\n', 'app.ts': 'needle\n', 'keys/server.pem': 'needle\n' });
      const result = resultOf<{ matches: Array<{ path: string }> }>(await callTool(secrets, 'grep', { pattern: 'needle' }));
      expect(result.matches.map((match) => match.path)).toEqual(['app.ts']);
      expect(errorCodeOf(await callTool(secrets, 'grep', { pattern: 'needle', path: '.env' }))).toBe('DENIED_PATH');
    } finally {
      secrets.cleanup();
    }
  });
});

describe("grep's second pass", () => {
  it('does not outlive a toolbox told to stop', async () => {
    const slow = makeWorkspace();
    const bin = mkdtempSync(path.join(tmpdir(), 'chamvi-path-'));
    const pidFile = path.join(bin, 'second-pass.pid');
    try {
      slow.write({ 'a.txt': 'needle\n' });
      for (const program of ['xargs', 'sleep']) symlinkSync(which(program), path.join(bin, program));
      // The first pass is the real rg; the second (started by xargs) hangs, as on a huge file.
      const fake = [
        '#!/bin/bash',
        `case " $* " in *" --files-with-matches "*) exec ${which('rg')} "$@" ;; esac`,
        `echo $$ > ${pidFile}`,
        'exec sleep 60',
      ].join('\n');
      writeFileSync(path.join(bin, 'rg'), `${fake}\n`, { mode: 0o755 });
      const toolbox = spawn(process.execPath, [TOOLBOX, '--root', slow.root, '--home', slow.home, 'call'], {
        env: { ...process.env, PATH: bin },
        stdio: ['pipe', 'ignore', 'ignore'],
      });
      toolbox.stdin.end(encodeRequest({ tool: 'grep', input: { pattern: 'needle' } }));
      const exited = new Promise((resolve) => toolbox.once('exit', resolve));
      for (let attempt = 0; attempt < 200 && !existsSync(pidFile); attempt += 1) await new Promise((resolve) => setTimeout(resolve, 25));
      const secondPass = Number(readFileSync(pidFile, 'utf8'));
      try {
        toolbox.kill('SIGTERM');
        await exited;
        for (let attempt = 0; attempt < 50 && alive(secondPass); attempt += 1) await new Promise((resolve) => setTimeout(resolve, 20));
        expect(alive(secondPass)).toBe(false);
      } finally {
        if (alive(secondPass)) process.kill(secondPass, 'SIGKILL');
      }
    } finally {
      slow.cleanup();
      rmSync(bin, { recursive: true, force: true });
    }
  });
});
