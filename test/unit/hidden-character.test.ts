// The one decision the operator's messages (short-field.ts) and the kubectl plugin
// (display-escape.ts) share: which characters are hidden, and how one is spelled when shown.
import { describe, expect, it } from 'vitest';
import { codePointName, HIDDEN_CHARACTER, spelledCharacter } from '../../operator/src/text/hidden-character.ts';

/** Whether one code point is hidden, by the shared class alone. */
const isHiddenCharacter = (character: string) => new RegExp(`^${HIDDEN_CHARACTER}$`, 'u').test(character);

describe('a hidden character', () => {
  it.each([
    // C0 controls and DEL in caret notation, as `cat -v` spells them.
    ['\u0000', '^@'],
    ['\u0007', '^G'],
    ['\t', '^I'],
    ['\n', '^J'],
    ['\r', '^M'],
    ['\u001b', '^['],
    ['\u001f', '^_'],
    ['\u007f', '^?'],
    // C1 controls: U+009B is an 8-bit CSI.
    ['\u0080', '<U+0080>'],
    ['\u009b', '<U+009B>'],
    ['\u009f', '<U+009F>'],
    // Format characters: bidi, zero-width, the BOM, the soft hyphen, the joiners, tags.
    ['\u202e', '<U+202E>'],
    ['\u2066', '<U+2066>'],
    ['\u061c', '<U+061C>'],
    ['\u200b', '<U+200B>'],
    ['\u200c', '<U+200C>'],
    ['\u200d', '<U+200D>'],
    ['\ufeff', '<U+FEFF>'],
    ['\u00ad', '<U+00AD>'],
    ['\u{e0041}', '<U+E0041>'],
    // Line and paragraph separators.
    ['\u2028', '<U+2028>'],
    ['\u2029', '<U+2029>'],
    // Default-ignorable code points that are not format characters.
    ['\u180b', '<U+180B>'],
    ['\u180f', '<U+180F>'],
    ['\u17b4', '<U+17B4>'],
    ['\u3164', '<U+3164>'],
    ['\u115f', '<U+115F>'],
    ['\uffa0', '<U+FFA0>'],
    ['\u034f', '<U+034F>'],
    ['\ufe0f', '<U+FE0F>'],
    ['\u{e0100}', '<U+E0100>'],
    ['\u{1bca0}', '<U+1BCA0>'],
    // The braille blank: a letter to a program, a blank to an eye.
    ['\u2800', '<U+2800>'],
    // Neither a format character nor default-ignorable, yet blank: the musical null notehead, the Khitan filler.
    ['\u{1d159}', '<U+1D159>'],
    ['\u{16fe4}', '<U+16FE4>'],
  ])('%j is hidden and spelled %s', (character, spelled) => {
    expect(isHiddenCharacter(character)).toBe(true);
    expect(spelledCharacter(character)).toBe(spelled);
  });

  it.each([' ', 'a', '~', 'é', '世', '😀', '\u00a0', '\u3000', '\u0300'])('%j is not hidden', (character) => {
    expect(isHiddenCharacter(character)).toBe(false);
  });

  it('spells a character that is not hidden (a look-alike blank a caller chooses to show) by its code point', () => {
    expect(spelledCharacter('\u00a0')).toBe('<U+00A0>');
    expect(codePointName('😀')).toBe('U+1F600');
  });

  it('is one character class, so a caller matches every hidden character of a text in one linear pass', () => {
    const hidden = new RegExp(HIDDEN_CHARACTER, 'gu');
    const text = `a\u001bb\u2800c${'\u200d'.repeat(100_000)}d\u{e0041}`;
    const shown = text.replace(hidden, spelledCharacter);
    expect(shown).toBe(`a^[b<U+2800>c${'<U+200D>'.repeat(100_000)}d<U+E0041>`);
  });
});
