// The toolbox line protocol both ends share (sandbox-image/toolbox/contract/protocol.ts): what
// the operator writes the toolbox reads, what the toolbox writes the operator reads, and a
// line too long to hold still says which request it answers.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import {
  decodeRequest,
  decodeResponse,
  encodeRequest,
  encodeFrameHeader,
  encodeImportRequest,
  encodeResponse,
  FrameReader,
  idFromLinePrefix,
  IMPORT_FRAME_MAX_BYTES,
  IMPORT_LAST_FRAME,
  isImportUnknown,
  LineSplitter,
  OVERSIZED_PREFIX_BYTES,
} from '../../sandbox-image/toolbox/contract/protocol.ts';

function split(maxLineBytes: number, chunks: Array<string | Buffer>, end = false) {
  const lines: string[] = [];
  const oversized: string[] = [];
  const splitter = new LineSplitter(maxLineBytes, { line: (line) => void lines.push(line), oversized: (prefix) => oversized.push(prefix) });
  for (const chunk of chunks) splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  if (end) splitter.end();
  return { lines, oversized };
}

describe('the toolbox line protocol', () => {
  it('reads back a request as the operator encodes it, one line each', () => {
    const line = encodeRequest({ id: 7, tool: 'read_file', input: { path: 'a.txt' } });
    expect(line.endsWith('\n')).toBe(true);
    expect(line.slice(0, -1)).not.toContain('\n');
    expect(decodeRequest(line)).toEqual({ kind: 'request', request: { id: 7, tool: 'read_file', input: { path: 'a.txt' } } });
    expect(decodeRequest('{"tool":"git_diff"}')).toEqual({ kind: 'request', request: { id: undefined, tool: 'git_diff', input: {} } });
  });

  it.each([
    ['not JSON', 'garbage', /not valid JSON/],
    ['an array', '[1]', /must be a JSON object/],
    ['an unknown tool', '{"tool":"rm_rf","input":{}}', /unknown tool "rm_rf"/],
  ])('refuses a request line that is %s', (_, line, message) => {
    const reading = decodeRequest(line);
    expect(reading.kind).toBe('invalid');
    expect(reading.kind === 'invalid' && reading.message).toMatch(message);
  });

  it('writes the id first in a response and reads the response back', () => {
    const ok = encodeResponse(3, { ok: true, result: { path: 'a.txt' } });
    expect(ok.startsWith('{"id":3,')).toBe(true);
    expect(decodeResponse(ok)).toEqual({ kind: 'response', id: 3, response: { ok: true, result: { path: 'a.txt' } } });
    const error = encodeResponse('two', { ok: false, error: { code: 'NOT_FOUND', message: 'no a.txt' } });
    expect(decodeResponse(error)).toEqual({
      kind: 'response',
      id: 'two',
      response: { ok: false, error: { code: 'NOT_FOUND', message: 'no a.txt' } },
    });
    expect(encodeResponse(undefined, { ok: true, result: 1 })).toBe('{"ok":true,"result":1}\n');
  });

  it.each([
    ['not JSON', '{"id":1,"ok":tru', /not JSON/],
    ['a result without ok', '{"id":1,"result":{}}', /not a response/],
    ['an error code outside the contract', '{"id":1,"ok":false,"error":{"code":"EVIL","message":"x"}}', /not a response/],
    ['null', 'null', /not a response/],
  ])('refuses a response line that is %s', (_, line, message) => {
    const reading = decodeResponse(line);
    expect(reading.kind).toBe('invalid');
    expect(reading.kind === 'invalid' && reading.message).toMatch(message);
  });

  it('finds the id at the start of a cut or broken line', () => {
    expect(idFromLinePrefix('{"id":42,"ok":true,"result":{"content":"aaaa')).toBe(42);
    expect(idFromLinePrefix(' { "id" : "a\\"b", "tool"')).toBe('a"b');
    expect(idFromLinePrefix('{"ok":true,"id":1}')).toBeUndefined();
    expect(idFromLinePrefix('garbage')).toBeUndefined();
  });
});

describe('LineSplitter', () => {
  it('joins lines split across chunks and skips blank ones', () => {
    expect(split(100, ['{"a":', '1}\n\n  \n{"b"', ':2}\n{"c":3}']).lines).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('hands on a last line without a newline at the end of the stream', () => {
    expect(split(100, ['one\ntwo'], true).lines).toEqual(['one', 'two']);
  });

  it('decodes a character split across chunks whole', () => {
    const bytes = Buffer.from('"é"\n');
    expect(split(100, [bytes.subarray(0, 2), bytes.subarray(2)]).lines).toEqual(['"é"']);
  });

  it('bounds lines in bytes, not characters: a longer line is never assembled, and the next one still arrives', () => {
    const wide = `{"id":9,"x":"${'é'.repeat(40)}"}`; // 54 characters, 94 bytes
    const { lines, oversized } = split(60, [`${wide}\n`, '{"id":10}\n']);
    expect(lines).toEqual(['{"id":10}']);
    expect(oversized).toHaveLength(1);
    expect(idFromLinePrefix(oversized[0]!)).toBe(9);
  });

  it('keeps only the first bytes of an oversized line, fed a byte at a time', () => {
    const long = `{"id":5,"x":"${'a'.repeat(10_000)}"}\n`;
    const { lines, oversized } = split(
      1_000,
      [...Buffer.from(long)].map((byte) => Buffer.from([byte])),
    );
    expect(lines).toEqual([]);
    expect(Buffer.byteLength(oversized[0]!)).toBeLessThanOrEqual(OVERSIZED_PREFIX_BYTES);
    expect(idFromLinePrefix(oversized[0]!)).toBe(5);
  });
  it('holds an unfinished line sent a byte per chunk in about its bytes of memory, however many chunks', () => {
    // Over pods/exec each write in the sandbox arrives as a chunk of its own: a line kept as
    // views of its chunks cost ~100 bytes of heap per byte (1.5 MB of line filled the chart's
    // 160 MiB heap). Fed as ws hands messages out, views into larger records.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const lines: string[] = [];
    const splitter = new LineSplitter(8 * 1_048_576, { line: (line) => void lines.push(line), oversized: () => undefined });
    const pieces = 1_000_000;
    gc();
    const before = process.memoryUsage();
    let record = Buffer.alloc(16_384, 0x61);
    for (let at = 0, index = 0; index < pieces; index++, at++) {
      if (at === record.length) [record, at] = [Buffer.alloc(16_384, 0x61), 0];
      splitter.push(record.subarray(at, at + 1));
    }
    gc();
    const after = process.memoryUsage();
    const grown = after.heapUsed - before.heapUsed + (after.arrayBuffers - before.arrayBuffers);
    // The line's own buffer is at most twice its bytes; 8 MiB leaves room for the test's own noise.
    expect(grown).toBeLessThan(8 * 1_048_576);
    splitter.push(Buffer.from('\n'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toBe('a'.repeat(pieces));
  });

  it('still refuses a line a byte past the bound fed a byte at a time, with its first bytes, and takes one of exactly the bound', () => {
    const bound = 100_000;
    const bytes = (text: string) => [...Buffer.from(text)].map((byte) => Buffer.of(byte));
    const exact = `{"id":3,"x":"${'b'.repeat(bound - 15)}"}`;
    expect(Buffer.byteLength(exact)).toBe(bound);
    const { lines, oversized } = split(bound, [...bytes(`${exact}\n`), ...bytes(`${exact}c\n`), ...bytes('{"id":4}\n')]);
    expect(lines).toEqual([exact, '{"id":4}']);
    expect(oversized).toHaveLength(1);
    expect(idFromLinePrefix(oversized[0]!)).toBe(3);
  });

  it('says while a line is unfinished and what its buffer holds, and forgets it when told to', () => {
    const lines: string[] = [];
    const splitter = new LineSplitter(4_096, { line: (line) => void lines.push(line), oversized: () => undefined });
    splitter.push(Buffer.from('{"id":1}\n'));
    expect([splitter.lineUnfinished, splitter.unfinishedLineBytes]).toEqual([false, 0]);
    splitter.push(Buffer.alloc(2_000, 0x61));
    expect(splitter.lineUnfinished).toBe(true);
    expect(splitter.unfinishedLineBytes).toBeGreaterThanOrEqual(2_000);
    splitter.push(Buffer.alloc(3_000, 0x61)); // past the bound: skipped, nothing held
    expect([splitter.lineUnfinished, splitter.unfinishedLineBytes]).toEqual([true, 0]);
    splitter.push(Buffer.from('a\n{"id":2'));
    expect(splitter.unfinishedLineBytes).toBeGreaterThan(0);
    splitter.discard();
    expect([splitter.lineUnfinished, splitter.unfinishedLineBytes]).toEqual([false, 0]);
    splitter.push(Buffer.from('{"id":3}\n'));
    expect(lines).toEqual(['{"id":1}', '{"id":3}']);
  });

  it('reads no further into a chunk once a handler discarded the splitter, and keeps none of it', () => {
    // The operator's session discards its splitter when it fails, which a handler can do mid-push.
    const seen: string[] = [];
    const splitter: LineSplitter = new LineSplitter(100, {
      line: (line) => {
        seen.push(line);
        if (line === '{"id":1}') splitter.discard();
      },
      oversized: (prefix) => {
        seen.push(`oversized ${prefix.slice(0, 8)}`);
        splitter.discard();
      },
      blank: () => {
        seen.push('blank');
        splitter.discard();
      },
    });
    // Oversized: the rest of the chunk, itself past the bound, is neither kept nor handed on.
    expect(splitter.push(Buffer.from(`{"id":9,${'x'.repeat(500)}`))).toBeUndefined();
    expect([splitter.lineUnfinished, splitter.unfinishedLineBytes]).toEqual([false, 0]);
    // Under the bound after a kept start: nothing of the chunk is kept either.
    splitter.push(Buffer.from('a'.repeat(60)));
    expect(splitter.unfinishedLineBytes).toBeGreaterThan(0);
    splitter.push(Buffer.from(`${'b'.repeat(60)}\n{"id":2}\n`));
    expect([splitter.lineUnfinished, splitter.unfinishedLineBytes]).toEqual([false, 0]);
    // A line or a blank line whose handler discarded: the lines after it in the chunk are not handed on.
    splitter.push(Buffer.from('{"id":1}\n{"id":3}\n{"id":4'));
    expect(splitter.lineUnfinished).toBe(false);
    splitter.push(Buffer.from('\n{"id":5}\n'));
    expect(seen).toEqual(['oversized {"id":9,', 'oversized aaaaaaaa', '{"id":1}', 'blank']);
  });

  it('tells a reader that asks of each blank line it skips', () => {
    let blanks = 0;
    const lines: string[] = [];
    const splitter = new LineSplitter(100, {
      line: (line) => void lines.push(line),
      oversized: () => undefined,
      blank: () => void blanks++,
    });
    splitter.push(Buffer.from('\n  \n{"a":1}\n\n'));
    expect([lines, blanks]).toEqual([['{"a":1}'], 3]);
  });
});

describe('a session import on the wire', () => {
  it('reads back the import request line, and refuses one whose prune is not a list of globs', () => {
    expect(decodeRequest(encodeImportRequest(3, ['test/**']))).toEqual({ kind: 'import', request: { id: 3, prune: ['test/**'] } });
    expect(decodeRequest('{"id":4,"import":{}}')).toEqual({ kind: 'import', request: { id: 4, prune: [] } });
    for (const bad of ['{"id":5,"import":7}', '{"id":5,"import":{"prune":"a"}}', '{"id":5,"import":{"prune":[""]}}']) {
      expect(decodeRequest(bad)).toMatchObject({ kind: 'invalid' });
    }
  });

  it("tells an older toolbox's answer to the request line from an import's own refusal", () => {
    // The line a toolbox before session imports answers (checked against that bundle).
    const old = decodeResponse('{"id":1,"ok":false,"error":{"code":"INVALID_INPUT","message":"protocol: unknown tool undefined"}}');
    expect(old.kind === 'response' && isImportUnknown(old.response)).toBe(true);
    const refused = decodeResponse('{"id":1,"ok":false,"error":{"code":"INVALID_INPUT","message":"protocol: import.prune must be ..."}}');
    expect(refused.kind === 'response' && isImportUnknown(refused.response)).toBe(false);
    expect(isImportUnknown({ ok: true, result: { receiving: true } })).toBe(false);
  });

  it('hands the bytes after a line whose handler says stop back unread', () => {
    const lines: string[] = [];
    const splitter = new LineSplitter(100, {
      line: (line) => (lines.push(line), line === 'import' ? 'stop' : undefined),
      oversized: () => undefined,
    });
    const rest = splitter.push(Buffer.from('a\nimport\n5\nhello'));
    expect(lines).toEqual(['a', 'import']);
    expect(Buffer.from(rest!).toString()).toBe('5\nhello');
    expect(splitter.push(Buffer.from('b\n'))).toBeUndefined();
    expect(lines).toEqual(['a', 'import', 'b']);
  });
});

describe('FrameReader', () => {
  const archive = Buffer.from('the archive, in frames of three bytes');
  const framed = (size: number) => {
    const parts: string[] = [];
    for (let at = 0; at < archive.length; at += size)
      parts.push(encodeFrameHeader(Math.min(size, archive.length - at)) + archive.subarray(at, at + size).toString());
    return Buffer.from(parts.join('') + IMPORT_LAST_FRAME + '{"id":2}\n');
  };

  it('gives the body and, after the last frame, what follows, fed in any pieces', () => {
    for (const piece of [1, 2, 5, 1000]) {
      const reader = new FrameReader();
      const input = framed(3);
      const body: Uint8Array[] = [];
      let rest: Uint8Array | undefined;
      for (let at = 0; at < input.length && rest === undefined; at += piece) {
        const reading = reader.push(input.subarray(at, at + piece));
        expect(reading.kind).toBe('frames');
        body.push(...reading.body);
        if (reading.kind === 'frames') rest = reading.rest;
      }
      expect(Buffer.concat(body).toString()).toBe(archive.toString());
      // The rest of the piece the last frame ended in (later pieces are the caller's).
      expect('{"id":2}\n'.startsWith(Buffer.from(rest!).toString())).toBe(true);
    }
  });

  it('refuses a count that is not a count, or one over the frame bound', () => {
    for (const bad of ['12x\n', '-1\n', '\n', '123456789\n', `${IMPORT_FRAME_MAX_BYTES + 1}\n`]) {
      expect(new FrameReader().push(Buffer.from(bad))).toMatchObject({ kind: 'invalid' });
    }
    expect(new FrameReader().push(Buffer.from(`${IMPORT_FRAME_MAX_BYTES}\nab`))).toMatchObject({
      kind: 'frames',
      body: [Buffer.from('ab')],
    });
  });
});
