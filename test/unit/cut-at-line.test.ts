import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../operator/src/api/index.ts';
import { cutAtLine, cutAtLineInStoredBytes } from '../../operator/src/reconcile/cut-at-line.ts';
import { storedTextBytes } from '../../operator/src/text/stored-json-bytes.ts';

describe('cutAtLine', () => {
  it('keeps text within the bound whole', () => {
    expect(cutAtLine('a\nb\n', 4)).toEqual({ text: 'a\nb\n', truncated: false });
    expect(cutAtLine('ü'.repeat(10), 20)).toEqual({ text: 'ü'.repeat(10), truncated: false });
  });

  it('cuts ASCII at the last line break near the bound', () => {
    const text = `${'x'.repeat(90)}\n${'y'.repeat(50)}\n`;
    expect(cutAtLine(text, 100)).toEqual({ text: `${'x'.repeat(90)}\n`, truncated: true });
  });

  it('bounds UTF-8 bytes, not characters, and never splits a character', () => {
    // 100 characters of 3 bytes each: 300 bytes.
    const result = cutAtLine('\uFFFD'.repeat(100), 100);
    expect(result.truncated).toBe(true);
    expect(Buffer.byteLength(result.text)).toBeLessThanOrEqual(100);
    expect(result.text).toBe('\uFFFD'.repeat(33));
    const emoji = cutAtLine('😀'.repeat(10), 10);
    expect(emoji.text).toBe('😀😀');
  });

  it('stays fast on a huge text: only the part that can fit is encoded', () => {
    const text = 'line of a diff\n'.repeat(1_000_000);
    const result = cutAtLine(text, 65_536);
    expect(Buffer.byteLength(result.text)).toBeLessThanOrEqual(65_536);
    expect(result.text.endsWith('\n')).toBe(true);
  });
});

describe('cutAtLineInStoredBytes', () => {
  it('keeps text within the bound whole', () => {
    expect(cutAtLineInStoredBytes('a\nb\n', 6)).toEqual({ text: 'a\nb\n', truncated: false });
    expect(cutAtLineInStoredBytes('<'.repeat(10), 60)).toEqual({ text: '<'.repeat(10), truncated: false });
  });

  it('bounds the stored size of a diff of `<` lines, which UTF-8 bytes count at a sixth, at a line break', () => {
    const diff = `+${'<'.repeat(99)}\n`.repeat(2_000);
    const result = cutAtLineInStoredBytes(diff, LIMITS.diff);
    expect(result.truncated).toBe(true);
    expect(storedTextBytes(result.text)).toBeLessThanOrEqual(LIMITS.diff);
    expect(storedTextBytes(result.text)).toBeGreaterThan(LIMITS.diff * 0.8);
    expect(result.text.endsWith('\n')).toBe(true);
    expect(diff.startsWith(result.text)).toBe(true);
  });

  it('bounds the stored size of a diff of control characters (text to git) at a line break', () => {
    const diff = `+${'\u0001'.repeat(99)}\n`.repeat(2_000);
    const result = cutAtLineInStoredBytes(diff, LIMITS.diff);
    expect(result.truncated).toBe(true);
    expect(storedTextBytes(result.text)).toBeLessThanOrEqual(LIMITS.diff);
    expect(result.text.endsWith('\n')).toBe(true);
  });

  it('never splits a character, nor a surrogate pair', () => {
    expect(cutAtLineInStoredBytes('😀'.repeat(10), 10)).toEqual({ text: '😀😀', truncated: true });
    expect(cutAtLineInStoredBytes('a<<<', 8)).toEqual({ text: 'a<', truncated: true });
  });

  it('counts a line break as the two bytes `\\n` is stored as', () => {
    // 15 characters, 16 bytes stored: 4096 lines fill 64 KiB exactly.
    const text = 'line of a diff\n'.repeat(10_000);
    expect(cutAtLineInStoredBytes(text, 65_536)).toEqual({ text: 'line of a diff\n'.repeat(4_096), truncated: true });
  });

  it('cuts a huge text of short lines at a line break within the bound', () => {
    const text = 'line of a diff\n'.repeat(1_000_000);
    const result = cutAtLineInStoredBytes(text, 65_536);
    expect(storedTextBytes(result.text)).toBeLessThanOrEqual(65_536);
    expect(result.text.endsWith('\n')).toBe(true);
  });
});
