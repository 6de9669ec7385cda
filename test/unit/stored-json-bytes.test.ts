// The size text and values take in the API server's stored JSON (Go's encoding/json), which
// etcd's request limit counts: the expected numbers are what `json.Marshal` writes (go1.26),
// but for \b and \f, which Go before 1.22 wrote as \u0008 and \u000c and are counted so.
import { describe, expect, it } from 'vitest';
import { storedJsonBytes, storedTextBytes, storedTextPrefix } from '../../operator/src/text/stored-json-bytes.ts';

describe('storedTextBytes', () => {
  it.each([
    ['a', 1],
    ['/', 1],
    ['\u007f', 1],
    ['<', 6],
    ['>', 6],
    ['&', 6],
    ['\u0001', 6],
    ['\u001f', 6],
    ['\u0000', 6],
    ['\b', 6],
    ['\f', 6],
    ['\n', 2],
    ['\r', 2],
    ['\t', 2],
    ['"', 2],
    ['\\', 2],
    ['\u2028', 6],
    ['\u2029', 6],
    ['é', 2],
    ['€', 3],
    ['\uFFFD', 3],
    ['😀', 4],
    ['\ud800', 3],
    ['\udc00', 3],
    ['<a href="x">&amp;</a>\n', 50],
  ])('counts %j as Go stores it: %i bytes', (text, bytes) => {
    expect(storedTextBytes(text)).toBe(bytes);
  });

  it('counts a lone surrogate between letters as U+FFFD, as the API server stores it', () => {
    expect(storedTextBytes('a\ud800b')).toBe(5);
  });
});

describe('storedJsonBytes', () => {
  it('is the size Go writes a decoded value again', () => {
    // json.Marshal of the decoded value: {"n":[1,2.5,null,true],"spec":{"task":"a\u003cb \u0026\u0026 c \u003e d\u0001"}}
    expect(storedJsonBytes({ spec: { task: 'a<b && c > d\u0001' }, n: [1, 2.5, null, true] })).toBe(80);
  });

  it('counts an escaped backslash before a letter as itself, not as the start of an escape', () => {
    expect(storedJsonBytes('\\b\\u0001\\ud800')).toBe(2 + 2 + 1 + 2 + 5 + 2 + 5);
  });

  it('agrees with the character by character count of storedTextPrefix, however the text is escaped', () => {
    const text = 'x<>&\u0001\b\f\n\r\t"\\\u2028\u2029é€😀\ud800\udc00\u007f \\b\\u0001\\ud800'.repeat(3);
    expect(storedTextBytes(text)).toBe(storedTextPrefix(text, Number.POSITIVE_INFINITY).bytes);
    expect(storedJsonBytes({ text })).toBe(storedTextPrefix(text, Number.POSITIVE_INFINITY).bytes + '{"text":""}'.length);
  });

  it('is nothing for what JSON.stringify leaves out', () => {
    expect(storedJsonBytes(undefined)).toBe(0);
  });
});

describe('storedTextPrefix', () => {
  it('takes the longest beginning within the bound, never half a surrogate pair', () => {
    expect(storedTextPrefix('ab<c', 7)).toEqual({ end: 2, bytes: 2 });
    expect(storedTextPrefix('ab<c', 8)).toEqual({ end: 3, bytes: 8 });
    expect(storedTextPrefix('a😀', 4)).toEqual({ end: 1, bytes: 1 });
    expect(storedTextPrefix('a😀', 5)).toEqual({ end: 3, bytes: 5 });
  });
});
