// The transcript's wire format and bounds (record/): what a step's entry keeps when the model
// or the repository makes it huge, which chunk an entry goes to, and what the reader trusts.
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  ENTRY_MAX_BYTES,
  RECORD_LABEL,
  STEPS_PER_CHUNK,
  buildTranscriptChunk,
  chunkIndexOf,
  decodeEntry,
  encodeEntry,
  opensChunk,
  readTranscript,
} from '../../operator/src/record/transcript-chunks.ts';
import { boundText, resumeKey, stepKey, type TranscriptEntry } from '../../operator/src/record/transcript-entry.ts';

const run = { metadata: { name: 'fix-login', namespace: 'agents', uid: '4f1c2b9e-0000-4000-8000-000000000001' } };
const usage = { inputTokens: 100, outputTokens: 20, cacheReadTokens: 0, reasoningTokens: 0, totalTokens: 120, complete: true };

function step(n: number, output = 'ok'): TranscriptEntry {
  return {
    key: stepKey(n),
    kind: 'step',
    step: n,
    at: '2026-11-30T12:00:00.000Z',
    text: { text: `step ${n}` },
    calls: [{ id: `c${n}`, tool: 'read_file', input: { text: '{"path":"README.md"}' }, result: { ok: true, output: { text: output } } }],
    usage,
  };
}

const chunkOf = (entries: TranscriptEntry[], index = 0) =>
  buildTranscriptChunk(run, index, Object.fromEntries(entries.map((entry) => [entry.key, encodeEntry(entry).value])));

describe('a transcript entry on the wire', () => {
  it('reads back as it was written', () => {
    const entry = step(3);
    const { key, value } = encodeEntry(entry);
    expect(decodeEntry(key, value.toString('base64'))).toEqual(entry);
  });

  it('stays within ENTRY_MAX_BYTES compressed when a tool returns 1 MiB of incompressible text, marking the cut with the size', () => {
    const noise = randomBytes(768 * 1024).toString('base64');
    const { key, value } = encodeEntry(step(1, noise));
    expect(value.length).toBeLessThanOrEqual(ENTRY_MAX_BYTES);
    const read = decodeEntry(key, value.toString('base64')) as TranscriptEntry;
    const output = read.calls![0]!.result!.output;
    expect(output.cutFrom).toBe(Buffer.byteLength(noise));
    expect(noise.startsWith(output.text)).toBe(true);
  });

  it('stays bounded with thousands of calls in one step, saying that the calls were left out', () => {
    const entry = step(1);
    entry.calls = Array.from({ length: 5000 }, (_, index) => ({
      id: `call-${index}-${randomBytes(8).toString('hex')}`,
      tool: 'bash',
      input: { text: randomBytes(64).toString('hex') },
      result: { ok: true, output: { text: randomBytes(64).toString('hex') } },
    }));
    const { key, value } = encodeEntry(entry);
    expect(value.length).toBeLessThanOrEqual(ENTRY_MAX_BYTES);
    expect((decodeEntry(key, value.toString('base64')) as TranscriptEntry).message).toMatch(/5000 tool calls left out/);
  });

  it('cuts text at a character boundary and says how large it was', () => {
    expect(boundText('héllo', 2)).toEqual({ text: 'h', cutFrom: 6 });
    expect(boundText('hello', 5)).toEqual({ text: 'hello' });
  });

  it('refuses a key that a ConfigMap could not hold', () => {
    expect(() => encodeEntry({ ...step(1), key: 'step/1' })).toThrow(/not of the form/);
  });
});

describe('chunks', () => {
  it(`puts ${STEPS_PER_CHUNK} steps in a chunk; the first step of each creates it`, () => {
    expect([1, 16, 17, 32, 33].map(chunkIndexOf)).toEqual([0, 0, 1, 1, 2]);
    expect(chunkIndexOf(0)).toBe(0);
    expect([1, 2, 16, 17, 33].map((n) => opensChunk({ kind: 'step', step: n }))).toEqual([true, false, false, true, true]);
    expect(opensChunk({ kind: 'approval', step: 17 })).toBe(false);
  });

  it('keeps a full chunk of worst-case steps below the 1 MiB an object may hold', () => {
    const worst = Array.from({ length: STEPS_PER_CHUNK }, (_, index) => step(index + 1, randomBytes(100_000).toString('base64')));
    const chunk = chunkOf(worst);
    expect(Buffer.byteLength(JSON.stringify(chunk))).toBeLessThan(1024 * 1024 - 64 * 1024);
  });

  it('is owned by the run and labelled for the plugin to find', () => {
    const chunk = chunkOf([step(1)]);
    expect(chunk.metadata!.ownerReferences).toEqual([
      expect.objectContaining({ uid: run.metadata.uid, controller: true, kind: 'CodingRun' }),
    ]);
    expect(chunk.metadata!.labels![RECORD_LABEL]).toBe('transcript');
    expect(chunk.metadata!.name).toMatch(/^fix-login-[0-9a-f]{16}-transcript-0$/);
  });
});

describe('reading a transcript', () => {
  it('orders entries across chunks, a resume after its step, and reads a key found twice once', () => {
    const resume: TranscriptEntry = { ...step(1), key: resumeKey(1, 's1-c12'), kind: 'approval' };
    const later = chunkOf([step(17), step(18)], 1);
    const first = chunkOf([step(2), resume, step(1)]);
    const again = chunkOf([step(2)]);
    const { entries, problems } = readTranscript([later, first, again], run);
    expect(entries.map((entry) => entry.key)).toEqual(['s000001', 's000001-c000012', 's000002', 's000017', 's000018']);
    expect(problems).toEqual([]);
  });

  it('ignores a ConfigMap labelled as the transcript that the run does not own (anyone may create one)', () => {
    const squatted = chunkOf([{ ...step(1), text: { text: 'rm -rf / was approved' } }]);
    squatted.metadata!.ownerReferences = [];
    const { entries, problems } = readTranscript([squatted, chunkOf([step(2)])], run);
    expect(entries.map((entry) => entry.key)).toEqual(['s000002']);
    expect(problems).toEqual([expect.stringMatching(/does not own/)]);
  });

  it('reports an entry it cannot read, and does not inflate a gzip bomb', () => {
    const chunk = chunkOf([step(1)]);
    chunk.binaryData!['s000002'] = Buffer.from('not gzip').toString('base64');
    chunk.binaryData!['s000003'] = gzipSync(Buffer.alloc(64 * 1024 * 1024)).toString('base64');
    const { entries, problems } = readTranscript([chunk], run);
    expect(entries.map((entry) => entry.key)).toEqual(['s000001']);
    expect(problems).toHaveLength(2);
    // Refused at the inflate bound, not after allocating 64 MiB.
    expect(problems.join('\n')).toMatch(/s000003 cannot be read: .*larger than/);
  });

  it.each([
    ['calls that are not a list', { calls: {} }],
    ['a call that is not an object', { calls: [null] }],
    ['a call without a string id', { calls: [{ id: 7, tool: 'bash' }] }],
    ['a message that is not text', { message: { text: 'x' } }],
  ])('reports an entry edited to hold %s, which its readers would throw on', (_, parts) => {
    const key = 's000002';
    const edited = gzipSync(JSON.stringify({ v: 1, key, step: 2, kind: 'step', ...parts })).toString('base64');
    expect(decodeEntry(key, edited)).toEqual({ problem: `entry ${key} is not a transcript entry` });
  });
});
