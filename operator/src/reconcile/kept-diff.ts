// The diff a run keeps when it ends, whoever ends it (the finalize job, a worker that fails
// the run, the controller): where it came from (status.result.diffSource), where it is kept
// whole, and the bounded copy status shows. One computation of status.result. Pure.
import { LIMITS, type DiffSource, type RunResult } from '../api/index.ts';
import { cutAtLineInStoredBytes } from './cut-at-line.ts';
import { diffLineCounts } from './diff-line-counts.ts';
import { diffReachesCut, diffSha } from './diff-config-map.ts';

export interface KeptDiff {
  /** final: taken from the sandbox as the run ended; snapshot: the last one taken after a step; none: nothing to take. */
  source: DiffSource;
  /** The change against the cloned revision, up to LIMITS.fullDiff. */
  diff: string;
  /** The change was larger than LIMITS.fullDiff and diff is only its beginning. */
  truncated: boolean;
  /** Bytes of the change are not UTF-8 (a file in another encoding): diff is not the change exactly (not-utf8-diff.ts). */
  notUtf8?: boolean;
  /**
   * The counts of `diff` as the operator counts it (countDiff), never the sandbox's word: of its
   * first 1 MiB only when truncated (withDiffNote says so in the run's message).
   */
  filesChanged: number;
  insertions: number;
  deletions: number;
  /** The ConfigMap that holds the whole diff, when one was written. */
  configMap?: string;
  /** Why the whole diff is not kept in a ConfigMap (the API server refused it, or it was changed there): said in the run's message and an Event. */
  notStored?: string;
  /** The commit the run cloned, which the diff is against (status.result.revision: spec.continueFrom clones it). */
  revision?: string;
}

export const NO_DIFF: KeptDiff = { source: 'none', diff: '', truncated: false, filesChanged: 0, insertions: 0, deletions: 0 };

/** status.result for a run that ends with `kept` (summary: the agent's final answer, if it gave one). */
export function keptDiffResult(kept: KeptDiff, summary: string): RunResult {
  // Bounded as the API server stores them, not as UTF-8: a model writes both, and 64 KiB of `<`
  // or of control characters is 384 KiB in etcd, enough to push the run's last write past its limit.
  const shown = cutAtLineInStoredBytes(kept.diff, LIMITS.diff);
  const answer = cutAtLineInStoredBytes(summary, LIMITS.summary);
  return {
    summary: answer.text,
    // Said, so that no reader (an eval's answer-excludes) takes the cut for the whole answer.
    ...(answer.truncated ? { summaryTruncated: true } : {}),
    diff: shown.text,
    diffTruncated: shown.truncated || kept.truncated,
    ...(kept.notUtf8 ? { diffNotUtf8: true } : {}),
    ...(kept.configMap ? { diffConfigMap: kept.configMap, diffSha256: diffSha(kept.diff) } : {}),
    ...(kept.revision ? { revision: kept.revision } : {}),
    filesChanged: kept.filesChanged,
    insertions: kept.insertions,
    deletions: kept.deletions,
    diffSource: kept.source,
  };
}

/**
 * A run's diff as read back from its ConfigMap, as taken at the end. What is stored carries no
 * size: one as long as the 1 MiB cut is taken for a cut (diffReachesCut), so its counts are not
 * read as the whole change's.
 */
export function storedKeptDiff(stored: { diff: string; configMap: string }): KeptDiff {
  return {
    source: 'final',
    diff: stored.diff,
    truncated: diffReachesCut(stored.diff),
    ...countDiff(stored.diff),
    configMap: stored.configMap,
  };
}

/**
 * What the operator itself recorded of a run's diff, which a diff read back from the run's
 * ConfigMap must match before an ending keeps it (the ConfigMap is writable by anyone who may
 * update ConfigMaps in the namespace): the sha256 of the last snapshot (diffSnapshot in the
 * run's sealed state), that of a snapshot being stored (pendingDiffSha256 there, saved before
 * its write, which may have landed without the save after it: workers/diff-snapshot.ts), and
 * that of an earlier ending (status.result.diffSha256, with the source it named; a run that
 * finished and then failed publishing).
 */
export interface RecordedDiff {
  snapshotSha256?: string | undefined;
  /** The snapshot whose sha256 was saved before its write, not yet recorded as stored. */
  pendingSha256?: string | undefined;
  ended?: { sha256: string; source: DiffSource } | undefined;
  /**
   * With the run's state gone or unreadable (Redis lost it, or a step's key no longer opens it):
   * its status counts a step, so a snapshot may have been stored (only a step stores one).
   * Undefined while the state is there: then its snapshot fields say what was stored.
   */
  stateGoneAfterSteps?: boolean;
}

/** What the run's state (when it is still there) and its status say of its diff. */
export function recordedDiff(
  state: { diffSnapshot?: { sha256: string } | undefined; pendingDiffSha256?: string | undefined } | undefined,
  result: Pick<RunResult, 'diffSha256' | 'diffSource'> | undefined,
  steps = 0,
): RecordedDiff {
  return {
    snapshotSha256: state?.diffSnapshot?.sha256,
    pendingSha256: state?.pendingDiffSha256,
    ended: result?.diffSha256 ? { sha256: result.diffSha256, source: result.diffSource ?? 'final' } : undefined,
    ...(state === undefined && steps > 0 ? { stateGoneAfterSteps: true } : {}),
  };
}

/**
 * Where a diff read back from the run's ConfigMap came from, when it is one the operator
 * stored: an earlier ending's (the source that ending named), else a snapshot (the last one
 * stored, or the one being stored); undefined when something was recorded and the diff matches
 * none of it (the ConfigMap was changed after the run stored it), or the state says the run
 * stored no snapshot (a diff there was put by someone else: a run whose steps changed no file,
 * planted under its ConfigMap's name). With the state gone or unreadable and no earlier ending
 * there is nothing to check it against: after a step (the status counts one) it is taken as the
 * last snapshot, as before the check, so a run whose state Redis lost keeps its work; before any
 * step none is kept, since no step stored one: a run whose prepare is still in flight has no
 * state yet, and a ConfigMap planted at its name (with the operator's labels and an
 * ownerReference to the run) would otherwise be certified in diffSha256 when the run ends.
 */
export function storedDiffSource(diff: string, recorded: RecordedDiff): DiffSource | undefined {
  const sha = diffSha(diff);
  if (recorded.ended?.sha256 === sha) return recorded.ended.source;
  if (recorded.snapshotSha256 === sha || recorded.pendingSha256 === sha) return 'snapshot';
  return recorded.ended === undefined && recorded.stateGoneAfterSteps === true ? 'snapshot' : undefined;
}

/** KeptDiff.notStored for a diff ConfigMap whose diff matches nothing the operator recorded (storedDiffSource). */
export const changedDiffNote = (configMap: string) =>
  `the diff ConfigMap ${configMap} was changed after the run stored it, or holds a diff the run has no record of storing; it is not kept`;

/**
 * The run's message, with what went wrong keeping its diff: a change cut at 1 MiB (status
 * cannot tell that cut from the 64 KiB one of its own copy, and the counts are of the part kept)
 * and why diffConfigMap is missing. A change that is not UTF-8 may be under 1 MiB and its text
 * over it (each such byte is a three-byte U+FFFD), cut where the ConfigMap's bound is: its
 * counts are of that part too, and the note says so without calling the change larger.
 */
export function withDiffNote(message: string, kept: KeptDiff): string {
  const counted = 'diffConfigMap holds, and status.result counts, only its first 1 MiB.';
  const cut = kept.truncated
    ? ` The change is larger than the 1 MiB the operator keeps: ${counted}`
    : kept.notUtf8 === true && diffReachesCut(kept.diff)
      ? ' The change is not UTF-8 text, and its text (each byte that is not, three bytes as U+FFFD) is larger than the 1 MiB ' +
        `the operator keeps: ${counted}`
      : '';
  const notStored = kept.notStored ? ` The full diff could not be kept: ${kept.notStored}` : '';
  return `${message}${cut}${notStored}`;
}

/**
 * Files, insertions and deletions of a unified diff, counted from its text: status.result's
 * counts for every diff a run keeps, whatever its source. The sandbox's `git diff --shortstat`
 * is never read for them: code in the sandbox can make git print any counts.
 */
export function countDiff(diff: string): Pick<KeptDiff, 'filesChanged' | 'insertions' | 'deletions'> {
  const counts = diffLineCounts(diff);
  return { filesChanged: counts.files.length, insertions: counts.insertions, deletions: counts.deletions };
}
