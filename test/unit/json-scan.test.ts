// The scan of a JSON text's structure without parsing it (operator/src/json/json-scan.ts), and
// the bound on a toolbox line's objects, arrays and members it checks before JSON.parse: the
// contract's largest answers pass with room to spare, a line the sandbox forges to blow up the
// operator's heap is refused without a parse. Its depth bounds a tool call's arguments
// (providers/answer-bounds.ts), its count over bytes a model's answer as it downloads
// (providers/limit-response-size.ts).
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  LIST_MAX_RESULTS,
  INSTRUCTIONS_MAX_DIAGNOSTICS,
  INSTRUCTIONS_MAX_SOURCES,
  SEARCH_MAX_RESULTS,
} from '../../sandbox-image/toolbox/contract/limits.ts';
import { encodeResponse } from '../../sandbox-image/toolbox/contract/protocol.ts';
import type { FileListResult, GrepResult, ReadFileTextResult } from '../../sandbox-image/toolbox/contract/tool-results.ts';
import { countJsonItems, jsonNestingDepth, JsonScan, RESPONSE_MAX_JSON_ITEMS } from '../../operator/src/json/json-scan.ts';
import { parseResponseLine } from '../../operator/src/sandbox/response-lines.ts';
import { DEFAULT_MAX_RESPONSE_BYTES } from '../../operator/src/sandbox/toolbox-sandbox.ts';

const MiB = 1_048_576;

/** A response line as the LineSplitter hands it on: decoded from bytes, so a flat string (a scan does not flatten it). */
const asLine = (text: string) => Buffer.from(text.endsWith('\n') ? text.slice(0, -1) : text).toString();

/** `prefix`, then `unit` repeated to fill the longest line the operator accepts, then `suffix`. */
function filledLine(prefix: string, unit: string, suffix: string): string {
  const count = Math.floor((DEFAULT_MAX_RESPONSE_BYTES - prefix.length - suffix.length) / unit.length);
  return Buffer.concat([Buffer.from(prefix), Buffer.alloc(count * unit.length, unit), Buffer.from(suffix)]).toString();
}

/** What a call returns or throws. */
function attempt<T>(action: () => T): T | unknown {
  try {
    return action();
  } catch (error) {
    return error;
  }
}

afterEach(() => vi.restoreAllMocks());

describe('the bound on the items of a toolbox line', () => {
  // Braces, brackets, commas and quotes in the text, as source code has them.
  const code = 'if (a[0] === "{") { call(b, "\\"", \'[\'); }';
  const largest: Array<[string, unknown]> = [
    [
      'list_files',
      { files: Array.from({ length: LIST_MAX_RESULTS }, (_, i) => `src/a{b},c[d]/file-${i}.ts`), truncated: true } satisfies FileListResult,
    ],
    [
      'grep',
      {
        matches: Array.from({ length: SEARCH_MAX_RESULTS }, (_, i) => ({ path: `src/f${i}.ts`, line: i + 1, text: code })),
        truncated: true,
        engine: 'rg',
      } satisfies GrepResult,
    ],
    [
      'read_file with repository instructions',
      {
        path: 'a.ts',
        content: `${code}\n`.repeat(2_000),
        startLine: 1,
        endLine: 2_000,
        totalLines: 9_000,
        truncated: true,
        instructions: {
          sources: Array.from({ length: INSTRUCTIONS_MAX_SOURCES }, (_, i) => ({
            path: `d${i}/AGENTS.md`,
            sha256: 'f'.repeat(64),
            content: code,
            includedBy: 'AGENTS.md',
          })),
          complete: false,
          diagnostics: Array.from({ length: INSTRUCTIONS_MAX_DIAGNOSTICS }, (_, i) => `x${i}: more than 64 instruction sources`),
        },
      } satisfies ReadFileTextResult,
    ],
  ];

  it.each(largest)('lets the largest %s answer of the contract through, with room to spare', (_, result) => {
    const line = asLine(encodeResponse(7, { ok: true, result }));
    expect(countJsonItems(line) * 8).toBeLessThan(RESPONSE_MAX_JSON_ITEMS);
    expect(parseResponseLine(line)).toEqual({ id: 7, response: { ok: true, result } });
  });

  it.each([
    ['empty objects in an array', '{"id":1,"ok":true,"result":[', '{},', '{}]}'],
    ['zeros in an array', '{"id":1,"ok":true,"result":[', '0,', '0]}'],
    ['members of one object', '{"id":1,"ok":true,"result":{', '"k":0,', '"k":0}}'],
  ])('refuses an 8 MiB answer of %s as a protocol error, cheaply and without parsing it', (_, prefix, unit, suffix) => {
    const line = filledLine(prefix, unit, suffix);
    const parse = vi.spyOn(JSON, 'parse');
    const before = process.memoryUsage().heapUsed;
    const outcome = attempt(() => parseResponseLine(line));
    const grown = process.memoryUsage().heapUsed - before;
    expect(outcome).toMatchObject({ name: 'SandboxError', reason: 'PROTOCOL', message: expect.stringMatching(/more than 65536 objects/) });
    expect(parse).not.toHaveBeenCalled();
    // Parsed, the line of empty objects would take ~180 MiB.
    expect(grown).toBeLessThan(4 * MiB);
  });

  it('does not count braces, brackets or commas inside strings, escaped quotes and backslashes included', () => {
    expect(countJsonItems('"{[,{[,"')).toBe(0);
    expect(countJsonItems(String.raw`["a\"{[,", {}]`)).toBe(3); // [ , {
    expect(countJsonItems(String.raw`["a\\", {}]`)).toBe(3); // the string ends at the quote after an escaped backslash
    expect(countJsonItems(String.raw`{"\\\"[{,":[]}`)).toBe(2); // { [
    expect(countJsonItems('"never closed {[,')).toBe(0);
    // A line of the longest size made of one string of braces is an answer like any other.
    const braces = filledLine('{"id":2,"ok":true,"result":{"content":"', '{[,\\"', '"}}');
    expect(countJsonItems(braces)).toBe(4); // { , , {
    expect(parseResponseLine(braces).id).toBe(2);
  });

  it('stops counting once past the bound', () => {
    expect(countJsonItems('[0,0,0,0,0,0]', 2)).toBe(3);
  });
});

describe('jsonNestingDepth', () => {
  it.each([
    ['{}', 1],
    ['{"a":[1,{"b":2}]}', 3],
    ['"[[[["', 0],
    ['{"a":"\\"[[[[\\\\"}', 1],
    ['{"a":"\\\\","b":[[1]]}', 3],
    ['[]{}[]', 1],
  ])('%s nests %i deep', (text, depth) => {
    expect(jsonNestingDepth(text)).toBe(depth);
  });

  it('measures 1 000 000 levels without recursion', () => {
    expect(jsonNestingDepth(`${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`)).toBe(1_000_000);
  });
});

describe('a scan in pieces', () => {
  // Backslashes and quotes at every place a cut can fall: an escaped quote, an escaped
  // backslash before a quote, a string of braces, and text after a string that ends a piece.
  const text = JSON.stringify({ a: ['x\\"[', { b: 'y\\' }, [1, 2, 3]], c: '{,', d: [['\\\\"', [{}]]] });

  it('counts across chunks as over the whole text, an escaped quote split between two included', () => {
    const text = JSON.stringify({ a: ['x\\"[', { b: 'y\\' }, [1, 2, 3]], c: '{,' });
    for (let cut = 0; cut <= text.length; cut++) {
      const tally = new JsonScan();
      tally.bytes(Buffer.from(text.slice(0, cut)));
      expect(tally.bytes(Buffer.from(text.slice(cut)))).toBe(countJsonItems(text));
    }
  });

  it('measures the same depth over pieces as over the whole text, wherever the cuts fall', () => {
    for (let first = 0; first <= text.length; first++) {
      for (const second of [first, first + 1, first + 2]) {
        const scan = new JsonScan();
        for (const piece of [text.slice(0, first), text.slice(first, second), text.slice(second)]) scan.text(piece);
        expect([scan.items, scan.deepest]).toEqual([countJsonItems(text), jsonNestingDepth(text)]);
      }
    }
    expect(jsonNestingDepth(text)).toBe(5); // { [ [ [ {
  });

  it('reads UTF-8 bytes as the text they encode, a character cut between chunks included', () => {
    const wide = JSON.stringify({ 'ключ{': ['значение [', { 'emoji 😀,': ['"\\', 'ü'] }], n: [1, 2] });
    const bytes = Buffer.from(wide);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const scan = new JsonScan();
      scan.bytes(bytes.subarray(0, cut));
      scan.bytes(bytes.subarray(cut));
      expect([scan.items, scan.deepest]).toEqual([countJsonItems(wide), jsonNestingDepth(wide)]);
    }
  });

  it('stops once past the bound, and scans no later piece', () => {
    const scan = new JsonScan(2);
    expect(scan.text('[0,0,')).toBe(3);
    expect(scan.text('0,0,[[[]]]]')).toBe(3);
    expect(scan.deepest).toBe(1);
  });
});
