import { describe, expect, it } from 'vitest';
import { cutAtLine } from '../../operator/src/reconcile/cut-at-line.ts';

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
