// What the model reads of a tool result that is over the bound: a text read keeps whole lines
// and says where it stopped; guidance sources are whole or left out, and named when left out.
import { describe, expect, it, vi } from 'vitest';
import { boundToolResult } from '../../operator/src/agent/bound-tool-result.ts';
import { fitTextRead, toolResultText } from '../../operator/src/agent/fit-tool-result.ts';
import { READ_MAX_CHARS, READ_MAX_LINES } from '../../sandbox-image/toolbox/contract/limits.ts';
import type { ReadFileTextResult, RepositoryInstructions } from '../../sandbox-image/toolbox/contract/tool-results.ts';

const LIMIT = 4_096;
const lines = (count: number, width = 30) => Array.from({ length: count }, (_, index) => `${index + 1}:`.padEnd(width, 'é'));
const read = (content: string[], extra: Partial<ReadFileTextResult> = {}): ReadFileTextResult => ({
  path: 'a.txt',
  content: content.join('\n'),
  startLine: 1,
  endLine: content.length,
  totalLines: content.length,
  truncated: false,
  ...extra,
});
const source = (path: string, bytes: number) => ({ path, sha256: 'f'.repeat(64), content: 'x'.repeat(bytes) });
const guidance = (...sources: ReturnType<typeof source>[]): RepositoryInstructions => ({ sources, complete: true, diagnostics: [] });

describe('toolResultText', () => {
  const cases: Array<{ name: string; tool: string; result: unknown; expect: (text: string) => void }> = [
    {
      name: 'a result within the bound is its JSON',
      tool: 'read_file',
      result: read(lines(3)),
      expect: (text) => expect(JSON.parse(text)).toEqual(read(lines(3))),
    },
    {
      name: 'a long read keeps the most whole lines that fit and says where it stopped',
      tool: 'read_file',
      result: read(lines(400), { totalLines: 900 }),
      expect: (text) => {
        const fit = JSON.parse(text) as ReadFileTextResult;
        const kept = fit.content.split('\n');
        expect(kept).toEqual(lines(400).slice(0, kept.length));
        expect(fit).toMatchObject({ startLine: 1, endLine: kept.length, totalLines: 900, truncated: true });
        expect(Buffer.byteLength(text)).toBeLessThanOrEqual(LIMIT);
        // One more line would not have fitted.
        expect(Buffer.byteLength(JSON.stringify({ ...fit, content: lines(kept.length + 1).join('\n') }))).toBeGreaterThan(LIMIT);
      },
    },
    {
      name: 'a read from an offset counts its lines from there',
      tool: 'read_file',
      result: read(lines(400), { startLine: 101, endLine: 500, totalLines: 500 }),
      expect: (text) => {
        const fit = JSON.parse(text) as ReadFileTextResult;
        expect(fit.endLine).toBe(100 + fit.content.split('\n').length);
      },
    },
    {
      name: 'guidance sources go first, whole, from the last, and are named',
      tool: 'read_file',
      result: read(lines(10), { instructions: guidance(source('AGENTS.md', 1_000), source('sub/AGENTS.md', 3_000)) }),
      expect: (text) => {
        const fit = JSON.parse(text) as ReadFileTextResult;
        expect(fit).toMatchObject({ content: lines(10).join('\n'), endLine: 10, truncated: false });
        expect(fit.instructions).toMatchObject({ sources: [{ path: 'AGENTS.md' }], complete: false });
        expect(fit.instructions!.diagnostics).toEqual(['left out to fit the tool result limit: sub/AGENTS.md']);
      },
    },
    {
      name: 'read_repository_instructions leaves sources out the same way',
      tool: 'read_repository_instructions',
      result: guidance(source('AGENTS.md', 1_000), source('CLAUDE.md', 3_000), source('sub/AGENTS.md', 2_000)),
      expect: (text) => {
        const fit = JSON.parse(text) as RepositoryInstructions;
        expect(fit.sources.map((each) => each.path)).toEqual(['AGENTS.md']);
        expect(fit.diagnostics).toEqual(['left out to fit the tool result limit: CLAUDE.md, sub/AGENTS.md']);
      },
    },
    {
      name: 'a single line longer than the bound falls back to head and tail with a note',
      tool: 'read_file',
      result: read(['y'.repeat(10_000)]),
      expect: (text) => {
        expect(text).toContain('bytes omitted');
        expect(Buffer.byteLength(text)).toBeLessThanOrEqual(LIMIT);
      },
    },
    {
      name: 'other tools get head and tail',
      tool: 'bash',
      result: { stdout: 'z'.repeat(10_000) },
      expect: (text) => expect(text).toContain('bytes omitted'),
    },
  ];
  for (const each of cases) it(each.name, () => each.expect(toolResultText(each.tool, each.result, LIMIT)));

  it('fitTextRead gives up when not one line fits', () => {
    expect(fitTextRead(read(['y'.repeat(10_000)]), LIMIT)).toBeUndefined();
  });

  it("bounds a read whose guidance is not the contract's (a forged answer: more sources than the toolbox sends) as any result", () => {
    // Code in the sandbox can write the toolbox's answer line. Dropping 200 000 sources one by one
    // re-measured the whole answer each time: the operator's event loop held for hours.
    const forged = read(['x'], {
      instructions: { sources: Array.from({ length: 200_000 }, () => ({ path: 'a', content: '' })), complete: true, diagnostics: [] },
    } as unknown as Partial<ReadFileTextResult>);
    const text = toolResultText('read_file', forged, LIMIT);
    expect(text).toContain('bytes omitted');
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(LIMIT);
    expect(toolResultText('read_repository_instructions', forged.instructions, LIMIT)).toContain('bytes omitted');
  });

  // The toolbox sends at most READ_MAX_LINES lines and READ_MAX_CHARS characters (read-file.ts
  // textWindow). A forged read past them was fitted line by line: each of the ~22 measures of
  // the binary search split, joined and stringified all 8 MiB, ~20 s of the operator's thread.
  it('bounds a read larger than the toolbox ever sends (a forged 8 MiB read of four million lines) as any result, measuring it once', () => {
    const forged = read([], { content: '\n'.repeat(4_000_000) + 'x'.repeat(200_000), endLine: 2, totalLines: 2 });
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      const text = toolResultText('read_file', forged, LIMIT);
      // Only the whole answer was made JSON: no line of it was tried as a fit.
      expect(stringify).toHaveBeenCalledTimes(1);
      expect(text).toBe(boundToolResult(JSON.stringify(forged), LIMIT).text);
    } finally {
      stringify.mockRestore();
    }
  });

  it.each([
    { name: 'one character over READ_MAX_CHARS', content: Array.from({ length: 1_024 }, () => 'w'.repeat(63)).join('\n') + 'ww' },
    { name: 'one line over READ_MAX_LINES', content: Array.from({ length: READ_MAX_LINES + 1 }, () => 'l').join('\n') },
  ])('bounds a read of $name as any result, not as whole lines', ({ content }) => {
    const text = toolResultText('read_file', read([], { content, endLine: 1, totalLines: 1 }), 1_024);
    expect(text).toContain('bytes omitted');
  });

  it("still fits a read at the contract's limits by whole lines", () => {
    const content = Array.from({ length: READ_MAX_LINES }, (_, index) => `${index}`.padEnd(31, 'e')).join('\n');
    expect(content.length).toBe(READ_MAX_LINES * 32 - 1);
    expect(content.length).toBeLessThanOrEqual(READ_MAX_CHARS);
    const edge = read([], { content: content + 'z'.repeat(READ_MAX_CHARS - content.length), endLine: READ_MAX_LINES });
    expect(edge.content.length).toBe(READ_MAX_CHARS);
    const fit = JSON.parse(toolResultText('read_file', edge, LIMIT)) as ReadFileTextResult;
    expect(fit).toMatchObject({ startLine: 1, truncated: true });
    expect(fit.content.split('\n')).toEqual(edge.content.split('\n').slice(0, fit.endLine));
  });

  it('leaves out the fewest sources that make a read fit, each whole', () => {
    const sources = Array.from({ length: 60 }, (_, index) => ({
      path: `s${index}/AGENTS.md`,
      sha256: '0'.repeat(64),
      content: 'g'.repeat(100),
    }));
    const fit = fitTextRead(read(['x'], { instructions: { sources, complete: true, diagnostics: [] } }), LIMIT)!;
    const kept = fit.instructions!.sources.length;
    expect(Buffer.byteLength(JSON.stringify(fit))).toBeLessThanOrEqual(LIMIT);
    // One more source would not have fitted.
    const oneMore = { ...fit, instructions: { ...fit.instructions!, sources: sources.slice(0, kept + 1) } };
    expect(Buffer.byteLength(JSON.stringify(oneMore))).toBeGreaterThan(LIMIT);
    expect(fit.instructions!.diagnostics.at(-1)).toBe(
      `left out to fit the tool result limit: ${sources
        .slice(kept)
        .map((source) => source.path)
        .join(', ')}`,
    );
  });
});
