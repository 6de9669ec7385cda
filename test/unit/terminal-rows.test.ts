// A line of the run record cut into rows no wider than the reader's terminal, so the terminal
// never wraps one to column 0 itself (cli/terminal-rows.ts).
import { describe, expect, it } from 'vitest';
import { cellWidth, MINIMUM_COLUMNS, textWidth, wrappedRows } from '../../operator/src/cli/terminal-rows.ts';

describe('cellWidth', () => {
  it('counts ASCII as one cell, CJK, Hangul, fullwidth forms and emoji as two', () => {
    expect(textWidth('abc ~')).toBe(5);
    expect(textWidth('界한ａ\u3000')).toBe(8);
    expect(textWidth('🚀')).toBe(2);
  });

  it('counts a combining mark as nothing on a letter and as a cell where a terminal may give it one', () => {
    expect(textWidth('e\u0301')).toBe(1);
    expect(cellWidth('\u0301', ' ')).toBe(1);
    expect(cellWidth('\u0301')).toBe(1);
  });

  it('errs wide on what a newer terminal may draw wide: unassigned and private-use code points', () => {
    expect(cellWidth('\u{e000}')).toBe(2);
    expect(cellWidth('\u0378')).toBe(2);
  });
});

describe('wrappedRows', () => {
  it('leaves a line that fits alone', () => {
    expect(wrappedRows('  | short', 80, '  | ')).toEqual(['  | short']);
  });

  it('cuts a long line into rows of at most columns - 1 cells, each further one after the marker, at a space when it keeps half the row', () => {
    const line = `  | ${'word '.repeat(40)}`;
    const rows = wrappedRows(line, 40, '  | ');
    expect(rows.every((row) => textWidth(row) <= 39)).toBe(true);
    expect(rows.slice(1).every((row) => row.startsWith('  | '))).toBe(true);
    expect(rows.every((row) => /(^|\s)word $/.test(row) || row === rows.at(-1))).toBe(true);
    expect(rows.map((row, index) => (index === 0 ? row : row.slice(4))).join('')).toBe(line);
  });

  it('cuts where the row is full when there is no space to cut at, and counts wide characters as two', () => {
    expect(wrappedRows(`x${'a'.repeat(50)}`, 21, '> ')).toEqual([`x${'a'.repeat(19)}`, `> ${'a'.repeat(18)}`, `> ${'a'.repeat(13)}`]);
    const rows = wrappedRows('界'.repeat(30), 21, '> ');
    expect(rows.map(textWidth)).toEqual([20, 20, 20, 6]);
  });

  it(`keeps rows of ${MINIMUM_COLUMNS} columns on a narrower terminal, and never hangs`, () => {
    const rows = wrappedRows('y'.repeat(100), 1, '  | ');
    expect(rows.every((row) => textWidth(row) <= MINIMUM_COLUMNS - 1)).toBe(true);
    expect(rows.join('').replaceAll('  | ', '')).toBe('y'.repeat(100));
  });

  it('cuts a row without spaces before an escape rather than inside it, so <U+202E> and ^I stay whole and can be searched for', () => {
    for (const columns of [20, 33, 41, 80]) {
      for (const line of [`  | ${'<U+202E>'.repeat(40)}`, `  | a${'^I'.repeat(60)}`, `  | ab${'<U+E0041>^['.repeat(20)}`]) {
        const rows = wrappedRows(line, columns, '  | ');
        expect(rows.every((row) => textWidth(row) <= columns - 1 || textWidth(row) <= MINIMUM_COLUMNS - 1)).toBe(true);
        expect(rows.map((row) => row.slice(4)).join('')).toBe(line.slice(4));
        for (const row of rows) expect(row.slice(4)).toMatch(/^[ab]*(<U\+[0-9A-F]{4,6}>|\^.)*$/);
      }
    }
  });
});
