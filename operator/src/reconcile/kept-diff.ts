// The diff a run keeps when it ends, whoever ends it (the finalize job, a worker that fails
// the run, the controller): where it came from (status.result.diffSource), where it is kept
// whole, and the bounded copy status shows. One computation of status.result. Pure.
import { LIMITS, type DiffSource, type RunResult } from '../api/index.ts';
import { cutAtLine } from './cut-at-line.ts';
import { diffSha } from './diff-config-map.ts';

export interface KeptDiff {
  /** final: taken from the sandbox as the run ended; snapshot: the last one taken after a step; none: nothing to take. */
  source: DiffSource;
  /** The change against the cloned revision, up to LIMITS.fullDiff. */
  diff: string;
  /** The change was larger than LIMITS.fullDiff and diff is only its beginning. */
  truncated: boolean;
  filesChanged: number;
  insertions: number;
  deletions: number;
  /** The ConfigMap that holds the whole diff, when one was written. */
  configMap?: string;
  /** Why the whole diff is not kept in a ConfigMap (the API server refused it): said in the run's message and an Event. */
  notStored?: string;
  /** The commit the run cloned, which the diff is against (status.result.revision: spec.continueFrom clones it). */
  revision?: string;
}

export const NO_DIFF: KeptDiff = { source: 'none', diff: '', truncated: false, filesChanged: 0, insertions: 0, deletions: 0 };

/** status.result for a run that ends with `kept` (summary: the agent's final answer, if it gave one). */
export function keptDiffResult(kept: KeptDiff, summary: string): RunResult {
  const shown = cutAtLine(kept.diff, LIMITS.diff);
  const answer = cutAtLine(summary, LIMITS.summary);
  return {
    summary: answer.text,
    // Said, so that no reader (an eval's answer-excludes) takes the cut for the whole answer.
    ...(answer.truncated ? { summaryTruncated: true } : {}),
    diff: shown.text,
    diffTruncated: shown.truncated || kept.truncated,
    ...(kept.configMap ? { diffConfigMap: kept.configMap, diffSha256: diffSha(kept.diff) } : {}),
    ...(kept.revision ? { revision: kept.revision } : {}),
    filesChanged: kept.filesChanged,
    insertions: kept.insertions,
    deletions: kept.deletions,
    diffSource: kept.source,
  };
}

/** A run's whole diff as read back from its ConfigMap: kept there whole (never a cut), as taken at the end. */
export function storedKeptDiff(stored: { diff: string; configMap: string }): KeptDiff {
  return { source: 'final', diff: stored.diff, truncated: false, ...countDiff(stored.diff), configMap: stored.configMap };
}

/** The run's message, with what went wrong keeping its diff (so the user knows why diffConfigMap is missing). */
export function withDiffNote(message: string, kept: KeptDiff): string {
  return kept.notStored ? `${message} The full diff could not be kept: ${kept.notStored}` : message;
}

/** Files, insertions and deletions of a unified diff, counted from its text (a snapshot kept without its shortstat). */
export function countDiff(diff: string): Pick<KeptDiff, 'filesChanged' | 'insertions' | 'deletions'> {
  let filesChanged = 0;
  let insertions = 0;
  let deletions = 0;
  for (const line of diff.split('\n')) {
    if (line.startsWith('diff --git ')) filesChanged++;
    else if (line.startsWith('+') && !line.startsWith('+++ ')) insertions++;
    else if (line.startsWith('-') && !line.startsWith('--- ')) deletions++;
  }
  return { filesChanged, insertions, deletions };
}
