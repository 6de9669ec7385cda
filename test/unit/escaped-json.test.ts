// Security #11.11: `-o json` is data, exact when redirected, so its own text must hold no
// character a terminal obeys or hides; JSON.stringify escapes only U+0000–U+001F.
import { describe, expect, it } from 'vitest';
import { escapedJson } from '../../operator/src/cli/escaped-json.ts';

// DEL, an 8-bit CSI erasing the line, NEL, a bidi override, an isolate, LS/PS, a zero-width space, a tag character, a Hangul filler.
const HOSTILE = 'ok\u007f\u009b2K\u0085\u202egnp.exe\u2066x\u2069\u2028\u2029\u200b\u{e0041}\u3164 done';
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\p{Cf}\u2028\u2029\u3164]/u;

describe('security #11.11 escapedJson', () => {
  it('writes DEL, C1 controls, bidi and other invisible characters as \\u escapes, and parses to the same value', () => {
    const value = { message: HOSTILE, nested: [{ [`key${HOSTILE}`]: HOSTILE }] };
    for (const text of [escapedJson(value), escapedJson(value, 2)]) {
      expect(text).not.toMatch(RAW);
      expect(JSON.parse(text)).toEqual(value);
    }
    expect(escapedJson(HOSTILE)).toBe(
      '"ok\\u007f\\u009b2K\\u0085\\u202egnp.exe\\u2066x\\u2069\\u2028\\u2029\\u200b\\udb40\\udc41\\u3164 done"',
    );
  });

  it('keeps the indentation of pretty-printed JSON and text that needs no escape as JSON.stringify writes it', () => {
    const value = { a: ['héllo 世界 👩‍💻', 1, null], b: { c: 'line\nbreak\ttab' } };
    expect(escapedJson(value, 2)).toBe(JSON.stringify(value, null, 2));
    expect(escapedJson(value)).toBe(JSON.stringify(value));
  });
});
