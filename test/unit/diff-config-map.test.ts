// The diff ConfigMap (reconcile/diff-config-map.ts), written by the finalize worker and read by
// `kubectl codingrun diff`: every diff goes in and comes back out, inside a ConfigMap's 1 MiB,
// and a plugin of another version finds it under the same keys.
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { LIMITS, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import {
  buildDiffConfigMap,
  decodeDiff,
  DIFF_GZIP_KEY,
  DIFF_KEY,
  encodeDiff,
  isCutDiff,
  PLAIN_DIFF_MAX_BYTES,
} from '../../operator/src/reconcile/diff-config-map.ts';
import { isOwnedByRun } from '../../operator/src/reconcile/ownership.ts';
import { boundText } from '../../operator/src/record/transcript-entry.ts';

const DIFF = 'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-Hello\n+Hello, world\n';
const gz = (text: string) => gzipSync(text).toString('base64');
const payloadBytes = ({ data, binaryData }: { data?: Record<string, string>; binaryData?: Record<string, string> }) =>
  Object.values(data ?? {}).reduce((sum, value) => sum + Buffer.byteLength(value), 0) +
  Object.values(binaryData ?? {}).reduce((sum, value) => sum + Buffer.from(value, 'base64').length, 0);

describe('the diff ConfigMap', () => {
  it('keeps the keys older and newer plugins read (API.md, kubectl codingrun diff --help)', () => {
    expect([DIFF_KEY, DIFF_GZIP_KEY]).toEqual(['diff', 'diff.gz']);
  });

  it('stores a diff that fits as plain text under data, and reads it back', () => {
    const stored = encodeDiff(DIFF);
    expect(stored).toEqual({ data: { [DIFF_KEY]: DIFF } });
    expect(decodeDiff(stored)).toBe(DIFF);
  });

  it('stores the largest plain diff with room left in the 1 MiB of a ConfigMap for its metadata', () => {
    const largestPlain = encodeDiff('+'.repeat(PLAIN_DIFF_MAX_BYTES));
    expect(largestPlain.data?.[DIFF_KEY]).toBeDefined();
    expect(payloadBytes(largestPlain)).toBeLessThanOrEqual(1024 * 1024 - 64 * 1024);
  });

  it('stores a diff too large for that gzip-compressed under binaryData, and reads it back', () => {
    const big = `${DIFF}${'+'.repeat(1000 * 1024)}\n`;
    const stored = encodeDiff(big);
    expect(Object.keys(stored.binaryData ?? {})).toEqual([DIFF_GZIP_KEY]);
    expect(stored.data).toBeUndefined();
    expect(payloadBytes(stored)).toBeLessThan(1024 * 1024);
    expect(decodeDiff(stored)).toBe(big);
  });

  it('reads gzip+base64 text under data (older operators wrote that)', () => {
    expect(decodeDiff({ data: { [DIFF_KEY]: gz(DIFF) } })).toBe(DIFF);
  });

  it('keeps text that only looks like gzip+base64', () => {
    expect(decodeDiff({ data: { [DIFF_KEY]: 'H4sI is how my notes start' } })).toBe('H4sI is how my notes start');
  });

  it('inflates no more than twice the largest diff it writes: a gzip bomb or a corrupt gzip reads as no diff', () => {
    // Anyone who may update ConfigMaps in the namespace can put this in a run's diff ConfigMap.
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024)).toString('base64');
    expect(bomb.length).toBeLessThan(128 * 1024);
    expect(decodeDiff({ binaryData: { [DIFF_GZIP_KEY]: bomb } })).toBeUndefined();
    const justOver = gzipSync('+'.repeat(2 * LIMITS.fullDiff + 1)).toString('base64');
    expect(decodeDiff({ binaryData: { [DIFF_GZIP_KEY]: justOver } })).toBeUndefined();
    // The largest the operator writes, and a little over it (a cut through a multi-byte character).
    expect(decodeDiff({ binaryData: { [DIFF_GZIP_KEY]: gzipSync('+'.repeat(LIMITS.fullDiff + 3)).toString('base64') } })).toHaveLength(
      LIMITS.fullDiff + 3,
    );
    const largest = '+'.repeat(LIMITS.fullDiff);
    expect(decodeDiff({ binaryData: { [DIFF_GZIP_KEY]: gzipSync(largest).toString('base64') } })).toBe(largest);
    expect(decodeDiff({ binaryData: { [DIFF_GZIP_KEY]: Buffer.from('not gzip').toString('base64') } })).toBeUndefined();
  });

  it('finds nothing in a ConfigMap without the keys', () => {
    expect(decodeDiff({ data: { other: 'x' } })).toBeUndefined();
  });

  it("is built under the run's derived name, owned by the run, holding the diff", () => {
    const run = { metadata: { name: 'hello', namespace: 'agents', uid: 'u-1' } } as ParsedCodingRun;
    const configMap = buildDiffConfigMap(run, DIFF);
    expect(configMap.metadata).toMatchObject({ namespace: 'agents' });
    expect(configMap.metadata?.name).toMatch(/diff/);
    expect(isOwnedByRun(configMap as Parameters<typeof isOwnedByRun>[0], run)).toBe(true);
    expect(decodeDiff(configMap as { data?: Record<string, string> })).toBe(DIFF);
  });
});

describe('isCutDiff: a kept diff that is the 1 MiB cut of a longer change', () => {
  const line = `+${'x'.repeat(99)}\n`;
  const long = line.repeat(Math.ceil((LIMITS.fullDiff * 1.5) / line.length));
  const cut = (text: string) => boundText(text, LIMITS.fullDiff).text;

  it('is the cut take-diff makes, even when the cut splits a character and drops it', () => {
    expect(isCutDiff(cut(long), { diffTruncated: true })).toBe(true);
    // A three-byte character across the boundary: the cut is a byte or two short of 1 MiB.
    const split = `${'a'.repeat(LIMITS.fullDiff - 1)}€ and more`;
    expect(Buffer.byteLength(cut(split))).toBeLessThan(LIMITS.fullDiff);
    expect(isCutDiff(cut(split), { diffTruncated: true })).toBe(true);
  });

  it('is not a whole diff, nor one whose status says it was kept whole', () => {
    expect(isCutDiff(line.repeat(10), { diffTruncated: true })).toBe(false);
    expect(isCutDiff(cut(long), { diffTruncated: false })).toBe(false);
    expect(isCutDiff(cut(long), undefined)).toBe(false);
  });
});
