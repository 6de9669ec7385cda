// A field someone else wrote, quoted in a message the operator keeps (reconcile/short-field.ts):
// short, and on one line whatever it holds.
import { describe, expect, it } from 'vitest';
import { SHORT_FIELD_CHARACTERS, shortField } from '../../operator/src/reconcile/short-field.ts';

describe('a field quoted in a message', () => {
  it('is the field itself when it is short and printable', () => {
    expect(shortField('CodingRun')).toBe('CodingRun');
    expect(shortField(2)).toBe('2');
  });

  it('shows a newline, ESC, DEL and a bidi override instead of keeping them, so it cannot start a line of its own', () => {
    expect(shortField('a\nb\u001b[2Kc\u007fd\u202Ee')).toBe('a^Jb^[[2Kc^?d<U+202E>e');
  });

  it('shows what renders as nothing: a Mongolian variation selector, a Hangul filler, a Khmer inherent vowel', () => {
    expect(shortField('a\u180bb\u3164c\u17b4d')).toBe('a<U+180B>b<U+3164>c<U+17B4>d');
  });

  it('keeps only its start, and says how long it was', () => {
    const shown = shortField(`${'k'.repeat(1024 * 1024)}\n`);
    expect(shown).toBe(`${'k'.repeat(SHORT_FIELD_CHARACTERS)}… (cut: 1048577 characters in all)`);
  });

  it('does not cut a character made of two code units in half', () => {
    const shown = shortField(`${'a'.repeat(SHORT_FIELD_CHARACTERS - 1)}😀😀`);
    expect(shown).toBe(`${'a'.repeat(SHORT_FIELD_CHARACTERS - 1)}… (cut: 203 characters in all)`);
  });
});
