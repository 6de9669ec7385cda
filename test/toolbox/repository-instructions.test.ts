// Repository instructions attached to text reads and returned by read_repository_instructions:
// scoped to the path's ancestors, root-first, includes outside fences, bounded, and never
// following a symlink, .git or an escape.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RepositoryInstructions } from '../../sandbox-image/toolbox/contract/tool-results.ts';
import { ancestorsRootFirst, includeLines, resolveInclude } from '../../sandbox-image/toolbox/repository-instructions.ts';
import { callTool, link, makeWorkspace, resultOf, type Workspace } from './toolbox-fixture.ts';

let workspace: Workspace;
beforeEach(() => {
  workspace = makeWorkspace();
});
afterEach(() => workspace.cleanup());

const instructionsFor = async (file: string) =>
  resultOf<{ instructions: RepositoryInstructions }>(await callTool(workspace, 'read_file', { path: file })).instructions;
const explicit = async (paths: string[]) =>
  resultOf<RepositoryInstructions>(await callTool(workspace, 'read_repository_instructions', { paths }));

describe('repository instructions', () => {
  it('collects AGENTS.md then CLAUDE.md for each directory from the root down to the file, and nothing beside it', async () => {
    workspace.write({
      'AGENTS.md': 'root agents\n',
      'CLAUDE.md': 'root claude\n',
      'packages/AGENTS.md': 'packages agents\n',
      'packages/api/CLAUDE.md': 'api claude\n',
      'packages/api/src/index.ts': 'export {};\n',
      'packages/web/AGENTS.md': 'web agents (not an ancestor)\n',
    });
    const instructions = await instructionsFor('packages/api/src/index.ts');
    expect(instructions.sources.map((source) => source.path)).toEqual([
      'AGENTS.md',
      'CLAUDE.md',
      'packages/AGENTS.md',
      'packages/api/CLAUDE.md',
    ]);
    expect(instructions.sources[0]).toEqual({
      path: 'AGENTS.md',
      sha256: createHash('sha256').update('root agents\n').digest('hex'),
      content: 'root agents\n',
    });
    expect(instructions).toMatchObject({ complete: true, diagnostics: [] });
  });

  it('includes @relative/path lines depth-first, but not inside code fences', async () => {
    workspace.write({
      'AGENTS.md':
        '# Rules\n@docs/style.md\n```\n@docs/fenced.md\n```\n~~~md\n@docs/tilde.md\n~~~\nsee @docs/inline.md for more\n@docs/after.md\n',
      'docs/style.md': 'style\n@nested/deeper.md\n',
      'docs/nested/deeper.md': 'deeper\n',
      'docs/after.md': 'after\n',
      'docs/fenced.md': 'must not be included\n',
      'docs/tilde.md': 'must not be included\n',
      'docs/inline.md': 'must not be included\n',
      'file.txt': 'x\n',
    });
    const instructions = await instructionsFor('file.txt');
    expect(instructions.sources.map((source) => [source.path, source.includedBy])).toEqual([
      ['AGENTS.md', undefined],
      ['docs/style.md', 'AGENTS.md'],
      ['docs/nested/deeper.md', 'docs/style.md'],
      ['docs/after.md', 'AGENTS.md'],
    ]);
    expect(instructions.complete).toBe(true);
  });

  it('leaves out a file over 32 KiB whole and says so', async () => {
    workspace.write({ 'AGENTS.md': `${'a'.repeat(32 * 1024)}x`, 'CLAUDE.md': 'small\n', 'f.txt': '' });
    const instructions = await instructionsFor('f.txt');
    expect(instructions.sources.map((source) => source.path)).toEqual(['CLAUDE.md']);
    expect(instructions.complete).toBe(false);
    expect(instructions.diagnostics.join('\n')).toMatch(/AGENTS\.md.*limit/);
  });

  it('leaves out a huge file by its size without reading it', async () => {
    workspace.write({ 'CLAUDE.md': 'small\n', 'f.txt': '' });
    // Sparse, and past 2 GiB, where reading it whole fails outright instead of being judged by size.
    writeFileSync(path.join(workspace.root, 'AGENTS.md'), '');
    truncateSync(path.join(workspace.root, 'AGENTS.md'), 3 * 1024 ** 3);
    const instructions = await instructionsFor('f.txt');
    expect(instructions.sources.map((source) => source.path)).toEqual(['CLAUDE.md']);
    expect(instructions.diagnostics).toEqual([
      `AGENTS.md: ${3 * 1024 ** 3} bytes is over the 32768-byte limit per file; read it with read_file`,
    ]);
  });

  it('weighs a file named by many includes once', async () => {
    workspace.write({ 'AGENTS.md': '@b.md\n'.repeat(500), 'f.txt': '' });
    writeFileSync(path.join(workspace.root, 'b.md'), '');
    truncateSync(path.join(workspace.root, 'b.md'), 10 * 1_048_576);
    const instructions = await instructionsFor('f.txt');
    expect(instructions.sources.map((source) => source.path)).toEqual(['AGENTS.md']);
    expect(instructions.complete).toBe(false);
    expect(instructions.diagnostics).toEqual([
      `b.md: ${10 * 1_048_576} bytes is over the 32768-byte limit per file; read it with read_file`,
    ]);
  });

  it('stops at 128 KiB in all', async () => {
    const chunk = 'b'.repeat(30 * 1024);
    workspace.write({
      'AGENTS.md': ['@one.md', '@two.md', '@three.md', '@four.md', '@five.md'].join('\n'),
      'one.md': chunk,
      'two.md': chunk,
      'three.md': chunk,
      'four.md': chunk,
      'five.md': chunk,
      'f.txt': '',
    });
    const instructions = await instructionsFor('f.txt');
    const total = instructions.sources.reduce((sum, source) => sum + Buffer.byteLength(source.content), 0);
    expect(total).toBeLessThanOrEqual(128 * 1024);
    expect(instructions.sources.map((source) => source.path)).toEqual(['AGENTS.md', 'one.md', 'two.md', 'three.md', 'four.md']);
    expect(instructions.complete).toBe(false);
    expect(instructions.diagnostics.join('\n')).toMatch(/five\.md.*total/);
  });

  it('does not follow symlinks, .git paths, escapes, or cycles, and reports each', async () => {
    const outside = mkdtempSync(path.join(tmpdir(), 'chamvi-outside-'));
    try {
      writeFileSync(path.join(outside, 'evil.md'), 'evil guidance\n');
      workspace.write({
        'AGENTS.md': '@linked.md\n@.git/config\n@../outside.md\n@/etc/passwd\n@cycle-a.md\n@missing.md\n',
        'cycle-a.md': '@cycle-b.md\n',
        'cycle-b.md': '@cycle-a.md\n',
        'f.txt': '',
      });
      link(path.join(outside, 'evil.md'), path.join(workspace.root, 'linked.md'));
      link(path.join(outside, 'evil.md'), path.join(workspace.root, 'CLAUDE.md'));
      const instructions = await instructionsFor('f.txt');
      expect(instructions.sources.map((source) => source.path)).toEqual(['AGENTS.md', 'cycle-a.md', 'cycle-b.md']);
      expect(JSON.stringify(instructions.sources)).not.toContain('evil guidance');
      const diagnostics = instructions.diagnostics.join('\n');
      expect(diagnostics).toMatch(/linked\.md.*symlink/);
      expect(diagnostics).toMatch(/CLAUDE\.md.*symlink/);
      expect(diagnostics).toMatch(/\.git/);
      expect(diagnostics).toMatch(/outside\.md.*outside/);
      expect(diagnostics).toMatch(/etc\/passwd.*outside/);
      expect(diagnostics).toMatch(/cycle/);
      expect(diagnostics).toMatch(/missing\.md/);
      expect(instructions.complete).toBe(false);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('resolves a symlinked directory to its real path and never reads guidance through the alias', async () => {
    workspace.write({ 'real/AGENTS.md': 'real guidance\n', 'real/f.txt': '' });
    link('real', path.join(workspace.root, 'alias'));
    const viaAlias = await explicit(['alias/new-file.ts']);
    // The path itself resolves to real/, whose guidance applies; the alias is never a source.
    expect(viaAlias.sources.every((source) => !source.path.startsWith('alias/'))).toBe(true);
  });

  it('gives guidance for paths that do not exist yet, and for a directory', async () => {
    workspace.write({ 'AGENTS.md': 'root\n', 'packages/AGENTS.md': 'packages\n', 'packages/api/AGENTS.md': 'api\n' });
    expect((await explicit(['packages/api/src/new.ts'])).sources.map((source) => source.path)).toEqual([
      'AGENTS.md',
      'packages/AGENTS.md',
      'packages/api/AGENTS.md',
    ]);
    expect((await explicit(['packages/api'])).sources.map((source) => source.path)).toEqual([
      'AGENTS.md',
      'packages/AGENTS.md',
      'packages/api/AGENTS.md',
    ]);
    expect((await explicit(['brand/new/dir/file.ts'])).sources.map((source) => source.path)).toEqual(['AGENTS.md']);
  });

  it('is left off image and base64 reads', async () => {
    workspace.write({ 'AGENTS.md': 'root\n', 'x.txt': 'x' });
    const base64 = resultOf(await callTool(workspace, 'read_file', { path: 'x.txt', encoding: 'base64' }));
    expect(base64).not.toHaveProperty('instructions');
  });

  it('parses includes and ancestors', () => {
    expect(includeLines('@a.md\n  @b.md  \ntext @c.md\n````\n@d.md\n```\n@e.md\n````\n@f.md')).toEqual(['a.md', 'b.md', 'f.md']);
    expect(resolveInclude('docs/AGENTS.md', '../x.md')).toBe('x.md');
    expect(resolveInclude('AGENTS.md', '../x.md')).toBeUndefined();
    expect(ancestorsRootFirst('a/b')).toEqual(['', 'a', 'a/b']);
  });
});
