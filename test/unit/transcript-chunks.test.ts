// The transcript's wire format and bounds (record/): what a step's entry keeps when the model
// or the repository makes it huge, which chunk an entry goes to, and what the reader trusts.
import { randomBytes } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  ENTRY_MAX_BYTES,
  ENTRY_MAX_INFLATED,
  ENTRY_MAX_JSON_BYTES,
  RECORD_LABEL,
  STEPS_PER_CHUNK,
  buildTranscriptChunk,
  chunkIndexOf,
  decodeEntry,
  encodeEntry,
  opensChunk,
  readTranscript,
  IGNORED_CHUNKS_LISTED,
  PROBLEMS_LISTED,
  TRANSCRIPT_MAX_IGNORED_CHUNKS,
  TRANSCRIPT_MAX_ENTRIES,
  TRANSCRIPT_MAX_INFLATED_BYTES,
  TranscriptReader,
} from '../../operator/src/record/transcript-chunks.ts';
import {
  MAX_RECORDED_STEPS,
  boundText,
  cutKey,
  endKey,
  resumeKey,
  stepKey,
  verifyKey,
  type TranscriptEntry,
} from '../../operator/src/record/transcript-entry.ts';
import { formatEntry } from '../../operator/src/cli/format-transcript.ts';

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

  it('stays within ENTRY_MAX_JSON_BYTES inflated when a step of many calls is repetitive, keeping every call', () => {
    // 16 KiB compressed was the only bound: such a step inflated to about 280 KB, and 241 of
    // them filled the reader's 64 MiB, so every reader left out the rest of an honest run.
    const entry = step(1);
    entry.text = { text: 'a'.repeat(8192) };
    entry.calls = Array.from({ length: 64 }, (_, index) => ({
      id: `call-${index}`,
      tool: 'bash',
      input: { text: 'i'.repeat(2048) },
      result: { ok: true, output: { text: 'o'.repeat(2048) } },
    }));
    const { key, value } = encodeEntry(entry);
    expect(gunzipSync(value).length).toBeLessThanOrEqual(ENTRY_MAX_JSON_BYTES);
    const read = decodeEntry(key, value.toString('base64')) as TranscriptEntry;
    expect(read.calls).toHaveLength(64);
    expect(read.calls![0]!.result!.output.cutFrom).toBe(2048);
  });

  it('cuts text at a character boundary and says how large it was', () => {
    expect(boundText('héllo', 2)).toEqual({ text: 'h', cutFrom: 6 });
    expect(boundText('hello', 5)).toEqual({ text: 'hello' });
  });

  // A U+FFFD in the text (each byte of a diff that is not UTF-8 becomes one) cut after one or
  // two of its three bytes decodes as a whole U+FFFD, which the text does hold there: it was
  // kept, and the cut came out a byte or two over its bound (a diff's, past the 1 MiB cut).
  it('never returns more than its bound, when the cut splits a U+FFFD the text holds', () => {
    const lossy = '+\uFFFD\uFFFD\uFFFD\n';
    for (const max of [1, 2, 3, 4, 5, 6, 7, 8, 9]) {
      const cut = boundText(lossy, max);
      expect(Buffer.byteLength(cut.text)).toBeLessThanOrEqual(max);
      expect(lossy.startsWith(cut.text)).toBe(true);
      expect(cut.cutFrom).toBe(11);
    }
    expect(boundText(lossy, 5).text).toBe('+\uFFFD');
    expect(boundText(lossy, 7).text).toBe('+\uFFFD\uFFFD');
    // A four-byte character split after three bytes decodes as one three-byte U+FFFD: still dropped.
    expect(boundText('a\u{1F600}', 4)).toEqual({ text: 'a', cutFrom: 5 });
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
    const answeredAt = '2026-11-30T12:01:00.000Z';
    const approval = { id: 's1-c12', tool: 'bash', decision: 'deny' as const, requestedAt: answeredAt, answeredAt };
    const resume: TranscriptEntry = { ...step(1), key: resumeKey(1, 's1-c12'), kind: 'approval', approval };
    const later = chunkOf([step(17), step(18)], 1);
    const first = chunkOf([step(2), resume, step(1)]);
    const again = chunkOf([step(2)]);
    const { entries, problems } = readTranscript([later, first, again], run);
    expect(entries.map((entry) => entry.key)).toEqual(['s000001', 's000001-c000012', 's000002', 's000017', 's000018']);
    expect(problems).toEqual([]);
  });

  it('orders the entries of a step by what happened: the step, its answers by call number, the cut, checks, the publish answer, the end', () => {
    const at = '2026-11-30T12:00:00.000Z';
    const answer = (step: number, id: string): TranscriptEntry => ({
      key: resumeKey(step, id),
      kind: 'approval',
      step,
      at,
      approval: { id, tool: id === 'publish' ? 'publish' : 'bash', decision: 'approve', requestedAt: at, answeredAt: at },
    });
    const check = (step: number, attempt: number): TranscriptEntry => ({
      key: verifyKey(step, attempt),
      kind: 'verify',
      step,
      at,
      verification: { attempt, passed: false, durationMs: 5, output: { text: 'FAIL' }, verdict: 'retry' },
    });
    const expected = [
      step(9),
      step(10),
      answer(10, 's10-c7'),
      answer(10, 's10-c999999'),
      // Past the millionth call of the run the number takes a seventh digit, and sorts before as text.
      answer(10, 's10-c1000000'),
      { key: cutKey(10), kind: 'cut' as const, step: 10, at, message: 'answers are no longer recorded' },
      check(10, 1),
      check(10, 2),
      answer(10, 'publish'),
      {
        key: endKey(10),
        kind: 'end' as const,
        step: 10,
        at,
        outcome: { phase: 'Failed', reason: 'PublishFailed', message: 'push refused' },
      },
      { key: cutKey(501), kind: 'cut' as const, step: 501, at, message: 'the transcript keeps 500 steps' },
    ];
    const shuffled = [expected[6]!, expected[10]!, expected[9]!, expected[3]!, expected[8]!, expected[1]!, expected[4]!];
    const rest = expected.filter((entry) => !shuffled.includes(entry));
    const { entries, problems } = readTranscript([chunkOf(shuffled), chunkOf(rest)], run);
    expect(problems).toEqual([]);
    expect(entries.map((entry) => entry.key)).toEqual(expected.map((entry) => entry.key));
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
    ['a call without its input', { calls: [{ id: 'c1', tool: 'bash' }] }],
    ['an approval without the approval', { kind: 'approval' }],
    ['a verification without its check', { kind: 'verify' }],
    ['an end without its outcome', { kind: 'end' }],
    ['a kind no operator writes', { kind: 'note' }],
  ])('reports an entry edited to hold %s, which its readers would throw on', (_, parts) => {
    const key = 's000002';
    const edited = gzipSync(JSON.stringify({ v: 1, key, step: 2, kind: 'step', at: '2026-11-30T12:00:00.000Z', ...parts })).toString(
      'base64',
    );
    const read = decodeEntry(key, edited);
    expect(read).toEqual({ problem: expect.stringMatching(new RegExp(`^entry ${key} is not a transcript entry: `)) });
    // And what a reader does with every entry that is read cannot throw on it.
    const chunk = chunkOf([step(1)]);
    chunk.binaryData![key] = edited;
    const transcript = readTranscript([chunk], run);
    expect(transcript.entries.map((entry) => entry.key)).toEqual(['s000001']);
    for (const entry of transcript.entries) expect(() => formatEntry(entry)).not.toThrow();
  });

  it('reads every kind of entry the workers write', () => {
    const at = '2026-11-30T12:00:00.000Z';
    const entries: TranscriptEntry[] = [
      step(1),
      {
        key: resumeKey(1, 's1-c2'),
        kind: 'approval',
        step: 1,
        at,
        approval: { id: 's1-c2', tool: 'bash', decision: 'approve', sha256: 'ab', requestedAt: at, answeredAt: at, user: 'alice' },
      },
      {
        key: verifyKey(1, 1),
        kind: 'verify',
        step: 1,
        at,
        verification: { attempt: 1, passed: false, exitCode: 1, durationMs: 12, output: { text: 'FAIL' }, verdict: 'retry' },
      },
      { key: endKey(2), kind: 'end', step: 2, at, outcome: { phase: 'Failed', reason: 'SandboxLost', message: 'gone' } },
      { key: cutKey(501), kind: 'cut', step: 501, at, message: 'the transcript keeps 500 steps' },
    ];
    const { entries: read, problems } = readTranscript([chunkOf(entries.slice(0, 4)), chunkOf([entries[4]!], 31)], run);
    expect(problems).toEqual([]);
    expect(read).toEqual([...entries].sort((a, b) => (a.key < b.key ? -1 : 1)));
  });
});

describe('what a read of a transcript trusts and holds', () => {
  it('stops at its bound when a hand-made chunk holds entries that each inflate to a megabyte, and says so', () => {
    // ~1 KiB each on the wire, 1 MB each inflated: 100 of them were 100 MB in the reader, past
    // its 64 MiB bound. Compressed at level 1: making the bombs is most of this test's time.
    const bomb = (n: number) => gzipSync(JSON.stringify({ v: 1, ...step(n), text: { text: 'a'.repeat(1_000_000) } }), { level: 1 });
    const chunk = chunkOf([step(1)]);
    for (let n = 2; n <= 100; n++) chunk.binaryData![stepKey(n)] = bomb(n).toString('base64');
    expect(JSON.stringify(chunk).length).toBeLessThan(1024 * 1024);
    const reader = new TranscriptReader(run);
    const { entries, problems } = reader.add([chunk]).result();
    expect(reader.full).toBe(true);
    expect(entries.length).toBeLessThanOrEqual(Math.ceil(TRANSCRIPT_MAX_INFLATED_BYTES / 1_000_000) + 1);
    expect(problems).toEqual([expect.stringMatching(/the rest was left out/)]);
  });

  it.each([
    ['refused at the inflate bound', gzipSync(Buffer.alloc(ENTRY_MAX_INFLATED + 1)).toString('base64')],
    [
      'cut short after inflating almost the bound',
      gzipSync(Buffer.alloc(ENTRY_MAX_INFLATED - 1))
        .subarray(0, -8)
        .toString('base64'),
    ],
    ['not gzip', Buffer.from('not gzip').toString('base64')],
  ])('counts an entry %s as the megabyte it may inflate, so such entries stop a read at its bound', (_, value) => {
    // Counted at their size on the wire (about 1.4 KiB), 10 000 bombs of 1 MiB + 1 cost 10 GiB of
    // inflating and 7.6 s of CPU in one read, 1.7 s of the shared operator's event loop a page.
    const chunk = chunkOf([]);
    for (let n = 1; n <= 200; n++) chunk.binaryData![stepKey(n)] = value;
    const reader = new TranscriptReader(run);
    const { problems } = reader.add([chunk]).result();
    expect(reader.full).toBe(true);
    expect(problems.filter((problem) => / cannot be read: /.test(problem)).length).toBeLessThanOrEqual(
      TRANSCRIPT_MAX_INFLATED_BYTES / ENTRY_MAX_INFLATED,
    );
    expect(problems.at(-1)).toMatch(/the rest was left out/);
  });

  it('counts an entry that inflates but is not JSON as what it inflated to, not as the megabyte a refused one may cost', () => {
    // Charged 1 MiB each, 64 such entries of 9 bytes stopped a read of an honest run after them.
    const chunk = chunkOf([step(1), step(2)]);
    for (let n = 3; n <= 200; n++) chunk.binaryData![stepKey(n)] = gzipSync('{not json').toString('base64');
    const reader = new TranscriptReader(run);
    const { entries, problems } = reader.add([chunk]).result();
    expect(reader.full).toBe(false);
    expect(entries.map((entry) => entry.step)).toEqual([1, 2]);
    expect(problems.some((problem) => /the rest was left out/.test(problem))).toBe(false);
  });

  it('reads the largest transcript its writer writes whole: every entry of a run fits the bound of a read', () => {
    // Repetitive steps inflated to about 90 KB each here (280 KB with 64 calls): a reader left
    // out the rest of an honest run after about 730 of them (241).
    const at = '2026-11-30T12:00:00.000Z';
    const calls = Array.from({ length: 20 }, (_, index) => ({
      id: `call-${index}`,
      tool: 'bash',
      input: { text: 'i'.repeat(2048) },
      result: { ok: true, output: { text: 'o'.repeat(2048) } },
    }));
    const full = (key: string, kind: TranscriptEntry['kind'], n: number): TranscriptEntry => ({
      ...step(n),
      key,
      kind,
      text: { text: 't'.repeat(8192) },
      calls,
    });
    const steps = Array.from({ length: MAX_RECORDED_STEPS }, (_, index) => index + 1);
    const approval = (n: number) => ({ id: `s${n}-c${n}`, tool: 'bash', decision: 'approve' as const, requestedAt: at, answeredAt: at });
    const written: TranscriptEntry[] = [
      ...steps.map((n) => full(stepKey(n), 'step', n)),
      ...steps.map((n) => ({ ...full(resumeKey(n, `s${n}-c${n}`), 'approval', n), approval: approval(n) })),
      { key: cutKey(MAX_RECORDED_STEPS), kind: 'cut', step: MAX_RECORDED_STEPS, at, message: 'x'.repeat(400) },
      { key: cutKey(MAX_RECORDED_STEPS + 1), kind: 'cut', step: MAX_RECORDED_STEPS + 1, at, message: 'x'.repeat(400) },
      ...Array.from({ length: 11 }, (_, index) => ({
        key: verifyKey(MAX_RECORDED_STEPS, index + 1),
        kind: 'verify' as const,
        step: MAX_RECORDED_STEPS,
        at,
        verification: { attempt: index + 1, passed: false, durationMs: 5, output: { text: 'v'.repeat(2048) }, verdict: 'retry' as const },
      })),
      { key: resumeKey(MAX_RECORDED_STEPS, 'publish'), kind: 'approval', step: MAX_RECORDED_STEPS, at, approval: approval(0) },
      {
        key: endKey(MAX_RECORDED_STEPS),
        kind: 'end',
        step: MAX_RECORDED_STEPS,
        at,
        outcome: { phase: 'Failed', reason: 'PublishFailed', message: 'm'.repeat(4096) },
      },
    ];
    const byChunk = new Map<number, TranscriptEntry[]>();
    for (const entry of written) byChunk.set(chunkIndexOf(entry.step), [...(byChunk.get(chunkIndexOf(entry.step)) ?? []), entry]);
    const reader = new TranscriptReader(run, (entry) => ({ ...entry, text: undefined, calls: undefined }));
    const { entries, problems } = reader.add([...byChunk].map(([index, entries]) => chunkOf(entries, index))).result();
    expect(problems).toEqual([]);
    expect(entries).toHaveLength(written.length);
    // And however each entry is filled: none inflates past ENTRY_MAX_JSON_BYTES (above).
    expect(written.length * ENTRY_MAX_JSON_BYTES).toBeLessThanOrEqual(TRANSCRIPT_MAX_INFLATED_BYTES);
  });

  it("reads a page's chunks in the order of their steps, not of their names (transcript-10 before transcript-2)", () => {
    const bombs = chunkOf([], 10);
    for (let n = 161; n <= 240; n++) bombs.binaryData![stepKey(n)] = gzipSync(Buffer.alloc(ENTRY_MAX_INFLATED + 1)).toString('base64');
    const { entries, problems } = new TranscriptReader(run).add([bombs, chunkOf([step(33), step(34)], 2)]).result();
    expect(entries.map((entry) => entry.key)).toEqual(['s000033', 's000034']);
    expect(problems.at(-1)).toMatch(/the rest was left out/);
  });

  it('keeps only what the caller keeps of each entry', () => {
    const { entries } = new TranscriptReader(run, (entry) => ({ ...entry, text: { text: '' } })).add([chunkOf([step(1)])]).result();
    expect(entries[0]!.text).toEqual({ text: '' });
    expect(entries[0]!.calls).toHaveLength(1);
  });

  it('ignores a chunk the run owns by its labels and owner but under a name its writer never gives', () => {
    const planted = chunkOf([{ ...step(1), text: { text: 'approved by alice' } }]);
    planted.metadata!.name = 'aaa-planted';
    const { entries, problems } = readTranscript([planted, chunkOf([step(2)])], run);
    expect(entries.map((entry) => entry.key)).toEqual(['s000002']);
    expect(problems).toEqual([expect.stringMatching(/ignored ConfigMap aaa-planted.*never written under that name/)]);
  });

  it('reads a chunk its writer kept apart (generateName), and says when two chunks disagree on an entry', () => {
    const real = chunkOf([step(1), step(2)]);
    const apart = chunkOf([step(3), { ...step(1), text: { text: 'rm -rf / was approved' } }]);
    apart.metadata!.name = `${real.metadata!.name!}-x7k2p`;
    const { entries, problems } = readTranscript([real, apart], run);
    expect(entries.map((entry) => entry.key)).toEqual(['s000001', 's000002', 's000003']);
    expect(entries[0]!.text).toEqual({ text: 'step 1' });
    expect(problems).toEqual([expect.stringMatching(/entry s000001 is in two of the run's ConfigMaps with different contents/)]);
  });

  it('takes an answer or a check redone into a chunk kept apart, differing only in when it was written and took, as one entry', () => {
    const at = '2026-11-30T12:00:00.000Z';
    const again = '2026-11-30T12:05:00.000Z';
    const approval = { id: 'publish', tool: 'publish', decision: 'approve' as const, requestedAt: at, answeredAt: at, user: 'alice' };
    const answer: TranscriptEntry = { key: resumeKey(3, 'publish'), kind: 'approval', step: 3, at, approval };
    const verification = { attempt: 1, passed: true, exitCode: 0, durationMs: 1200, output: { text: 'ok' }, verdict: 'passed' as const };
    const check: TranscriptEntry = { key: verifyKey(3, 1), kind: 'verify', step: 3, at, verification };
    const real = chunkOf([step(3), answer, check]);
    const apart = chunkOf([
      { ...answer, at: again },
      { ...check, at: again, verification: { ...verification, durationMs: 1350 } },
    ]);
    apart.metadata!.name = `${real.metadata!.name!}-x7k2p`;
    for (const chunks of [
      [real, apart],
      [apart, real],
    ]) {
      const { entries, problems } = readTranscript(chunks, run);
      expect(problems).toEqual([]);
      expect(entries.map((entry) => entry.key)).toEqual(['s000003', 's000003-v000001', 's000003-c000000']);
    }
    // Anything else that differs still may be tampering: who answered, what the check found.
    const forged = chunkOf([
      { ...answer, at: again, approval: { ...approval, user: 'mallory' } },
      { ...check, verification: { ...verification, passed: false } },
    ]);
    forged.metadata!.name = `${real.metadata!.name!}-q9w8e`;
    const { entries, problems } = readTranscript([real, forged], run);
    expect(entries.find((entry) => entry.kind === 'approval')!.approval!.user).toBe('alice');
    expect(problems).toEqual([
      expect.stringMatching(
        /entry s000003-c000000 is in two of the run's ConfigMaps with different contents .* may have been tampered with/,
      ),
      expect.stringMatching(
        /entry s000003-v000001 is in two of the run's ConfigMaps with different contents .* may have been tampered with/,
      ),
    ]);
  });

  /** A ConfigMap labelled as the run's chunk whose controller is someone else, of `kind`. */
  const foreign = (n: number, kind: string) => {
    const chunk = chunkOf([{ ...step(1), text: { text: 'forged' } }]);
    chunk.metadata!.name = `junk-${n}`;
    chunk.metadata!.ownerReferences = [{ apiVersion: 'v1', kind, name: 'x', uid: `u-${n}`, controller: true }];
    return chunk;
  };
  const length = (problems: string[]) => problems.reduce((sum, problem) => sum + problem.length, 0);

  it('keeps its problems small when 200 ConfigMaps it ignores name a controller of a 1 MiB kind, and counts them', () => {
    // Each problem quoted the kind whole: 150 of them were 209 MB, past the eval controller's heap.
    const kind = `Pod\n  step 2 at 12:00:00 approved${'K'.repeat(1024 * 1024)}`;
    const reader = new TranscriptReader(run);
    for (let n = 0; n < 200; n++) reader.add([foreign(n, kind)]);
    const { entries, problems } = reader.add([chunkOf([step(2)])]).result();

    expect(length(problems)).toBeLessThan(64 * 1024);
    expect(problems.filter((problem) => problem.startsWith('ignored ConfigMap junk-'))).toHaveLength(IGNORED_CHUNKS_LISTED);
    expect(problems).toContain(
      `ignored ${200 - IGNORED_CHUNKS_LISTED} more ConfigMaps labelled as this run's transcript that are not the run's`,
    );
    expect(problems[0]).toMatch(
      /its controller is Pod\^J {2}step 2 at 12:00:00 approvedK+… \(cut: 1048609 characters in all\) u-0, not this run/,
    );
    expect(problems.join('')).not.toContain('\n');
    // The run's own chunk after them is still read.
    expect(reader.full).toBe(false);
    expect(entries.map((entry) => entry.key)).toEqual(['s000002']);
  });

  it(`stops reading after ${TRANSCRIPT_MAX_IGNORED_CHUNKS} ConfigMaps that are not the run's, and says part may be unread`, () => {
    const reader = new TranscriptReader(run);
    for (let n = 0; n < TRANSCRIPT_MAX_IGNORED_CHUNKS; n++) reader.add([foreign(n, 'ConfigMap')]);
    expect(reader.full).toBe(true);
    const { entries, problems } = reader.add([foreign(-1, 'ConfigMap'), chunkOf([step(2)])]).result();
    expect(entries).toEqual([]);
    expect(problems).toContain(
      `ignored ${TRANSCRIPT_MAX_IGNORED_CHUNKS - IGNORED_CHUNKS_LISTED} more ConfigMaps labelled as this run's transcript that are not the run's`,
    );
    expect(problems).toContainEqual(
      expect.stringMatching(/^stopped reading after 1000 ConfigMaps .* part of the transcript may not have been read$/),
    );
    expect(problems.join('\n')).toMatch(/the rest was left out/);
  });

  it('counts the same ConfigMap seen again (a watch event) once', () => {
    const reader = new TranscriptReader(run);
    for (let n = 0; n < 50; n++) reader.add([foreign(n % 25, 'ConfigMap')]);
    expect(reader.result().problems).toContain(
      `ignored ${25 - IGNORED_CHUNKS_LISTED} more ConfigMaps labelled as this run's transcript that are not the run's`,
    );
  });

  it("quotes the start of an entry's megabyte-long wire version, on one line, and lists at most PROBLEMS_LISTED problems", () => {
    const wire = (n: number, v: unknown) => gzipSync(JSON.stringify({ ...step(n), v }), { level: 1 }).toString('base64');
    const chunk = chunkOf([]);
    chunk.binaryData![stepKey(1)] = wire(1, `2\n${'9'.repeat(1_000_000)}`);
    for (let n = 2; n <= PROBLEMS_LISTED + 50; n++) chunk.binaryData![stepKey(n)] = wire(n, n);
    const { problems } = readTranscript([chunk], run);

    expect(problems).toHaveLength(PROBLEMS_LISTED + 1);
    expect(problems[0]).toMatch(/^entry s000001 has wire version 2\^J9+… \(cut: 1000002 characters in all\), not 1$/);
    expect(problems[0]!.length).toBeLessThan(300);
    expect(problems.at(-1)).toBe('50 more problems reading the transcript are not listed');
  });

  it('counts an unlisted problem met again (each watch event of its chunk decodes it again) once, and a new one once more', () => {
    const wire = (n: number) => gzipSync(JSON.stringify({ ...step(n), v: 2 })).toString('base64');
    const chunk = chunkOf([]);
    for (let n = 1; n <= PROBLEMS_LISTED + 50; n++) chunk.binaryData![stepKey(n)] = wire(n);
    const reader = new TranscriptReader(run);
    expect(reader.add([chunk]).result().problems.at(-1)).toBe('50 more problems reading the transcript are not listed');
    // The same chunk again, as `logs -f` sees it at each append.
    expect(reader.add([chunk]).result().problems.at(-1)).toBe('50 more problems reading the transcript are not listed');
    chunk.binaryData![stepKey(PROBLEMS_LISTED + 51)] = wire(PROBLEMS_LISTED + 51);
    const { problems } = reader.add([chunk]).result();
    expect(problems.at(-1)).toBe('51 more problems reading the transcript are not listed');
    expect(problems).toHaveLength(PROBLEMS_LISTED + 1);
  });

  it('keeps at most as many unlisted problems apart as a read decodes entries, and then says the count is a floor', () => {
    // Entries read once, then the same keys with other contents in two more of the run's chunks:
    // a problem each, and none of them decoded, so the entries bound does not stop them.
    const keys = Array.from({ length: TRANSCRIPT_MAX_ENTRIES }, (_, index) => stepKey(index + 1));
    const read = chunkOf([]);
    for (const key of keys) read.binaryData![key] = gzipSync(JSON.stringify({ ...step(1), key, v: 1 }), { level: 1 }).toString('base64');
    const other = (index: number) => {
      const chunk = chunkOf([], index);
      for (const key of keys) chunk.binaryData![key] = Buffer.from(`${key} in ${index}`).toString('base64');
      return chunk;
    };
    const { problems } = new TranscriptReader(run).add([read, other(1), other(2)]).result();
    expect(problems).toHaveLength(PROBLEMS_LISTED + 1);
    expect(problems.at(-1)).toBe(`at least ${TRANSCRIPT_MAX_ENTRIES} more problems reading the transcript are not listed`);
  });

  it('takes a chunk seen again with a newer entry under a key (a redone step) without a warning', () => {
    const reader = new TranscriptReader(run);
    reader.add([chunkOf([step(1)])]);
    const { entries, problems } = reader.add([chunkOf([{ ...step(1), text: { text: 'redone' } }, step(2)])]).result();
    expect(problems).toEqual([]);
    expect(entries.map((entry) => entry.text?.text)).toEqual(['redone', 'step 2']);
  });
});
