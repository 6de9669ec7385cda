// A field someone else wrote, quoted in a message the operator keeps (reconcile/short-field.ts):
// short, and on one line whatever it holds.
import { describe, expect, it } from 'vitest';
import { escapeForDisplay } from '../../operator/src/cli/display-escape.ts';
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

  it('shows the braille blank, which reads as a space, as the CLI shows it', () => {
    // The operator's list missed U+2800 while the plugin's showed it: one field read two ways.
    expect(shortField('kind\u2800Pod')).toBe('kind<U+2800>Pod');
    expect(shortField('kind\u2800Pod')).toBe(escapeForDisplay('kind\u2800Pod', 'inline').text);
  });

  it('shows every hidden character the CLI shows on one line, spelled the same', () => {
    const field =
      'a\u0000\t\n\u001b\u007f\u009b\u00ad\u061c\u115f\u17b4\u180b\u200b\u2028\u2060\u2066\u2800\u3164\ufe0f\ufeff\u{e0041}\u{e0100}b';
    expect(shortField(field)).toBe(escapeForDisplay(field, 'inline').text);
    expect(shortField(field)).not.toMatch(/[^\x20-\x7e]/);
  });

  it('shows each joiner of a long run, after cutting, so a field of a million joiners costs no more than its start', () => {
    const shown = shortField('\u200d'.repeat(1024 * 1024));
    expect(shown).toBe(`${'<U+200D>'.repeat(SHORT_FIELD_CHARACTERS)}… (cut: 1048576 characters in all)`);
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
