// Where `diff NAME` finds a run's diff: the full diff ConfigMap (status.result.diffConfigMap,
// written by the finalize worker; its format is reconcile/diff-config-map.ts). Without one,
// the bounded copy in status.result.diff is used and flagged when it is truncated. A change
// that is not UTF-8 text (status.result.diffNotUtf8) is printed with a warning. A ConfigMap
// the run does not own (controller ownerReference to the run's uid, the operator's labels) is
// refused, never printed: its name is no proof of whose it is (security #11.6). So is one whose
// diff is not the one the run kept there (status.result.diffSha256): the run's own ConfigMap
// can still be edited by whoever may edit ConfigMaps in the namespace.
import type { CodingRun } from '../api/index.ts';
import { decodeDiff, DIFF_GZIP_KEY, DIFF_KEY, isKeptDiff, type DiffConfigMap } from '../reconcile/diff-config-map.ts';
import { isOwnedByRun, whyNotOwned } from '../reconcile/ownership.ts';
import { quotedInline } from './display-escape.ts';
import { DiffNotOwnedError } from './errors/diff-not-owned-error.ts';
import { DiffUnavailableError } from './errors/diff-unavailable-error.ts';

export interface DiffText {
  text: string;
  /** Set when the text is not the whole diff: say so on stderr. */
  warning?: string;
}

/** Said with whatever diff is printed for a run whose change is not UTF-8 text (status.result.diffNotUtf8). */
export const NOT_UTF8_WARNING =
  'warning: the change holds bytes that are not UTF-8 text (a file in another encoding); this diff shows them as U+FFFD, ' +
  'so it is not the change exactly: git apply fails on it or writes other bytes, and the operator neither publishes it nor continues from it';

/**
 * The diff to print for a run, given its diff ConfigMap (undefined when it does not exist or
 * none is named). Throws DiffUnavailableError with what to do when there is no diff, and
 * DiffNotOwnedError for a ConfigMap that is not the run's (its metadata is needed).
 */
export function chooseDiff(run: CodingRun, configMap: DiffConfigMap | undefined): DiffText {
  const chosen = chooseDiffText(run, configMap);
  if (run.status?.result?.diffNotUtf8 !== true) return chosen;
  return { ...chosen, warning: chosen.warning ? `${chosen.warning}\n${NOT_UTF8_WARNING}` : NOT_UTF8_WARNING };
}

function chooseDiffText(run: CodingRun, configMap: DiffConfigMap | undefined): DiffText {
  const result = run.status?.result;
  const name = run.metadata.name;
  if (configMap && !isOwnedByRun(configMap, run)) {
    throw new DiffNotOwnedError(
      `ConfigMap ${run.metadata.namespace}/${result?.diffConfigMap ?? '?'} named in codingrun "${name}"'s status.result.diffConfigMap is not the run's ` +
        // Why names the ownerReference's kind and uid, free text to whoever wrote the ConfigMap.
        `(${quotedInline(whyNotOwned(configMap, run))}), so it is not printed: anyone who can create ConfigMaps in the namespace can make one under that name. ` +
        `The run's bounded copy is in status.result.diff (kubectl get codingrun ${name} -o jsonpath='{.status.result.diff}'); find out who made the ConfigMap.`,
    );
  }
  if (configMap) {
    const text = decodeDiff(configMap);
    // An approver reads this before approving a publish, whose push checks the same sha256:
    // a changed copy must never be what they read.
    if (text !== undefined && !isKeptDiff(text, result)) {
      throw new DiffNotOwnedError(
        `ConfigMap ${run.metadata.namespace}/${result?.diffConfigMap ?? '?'} no longer holds the diff codingrun "${name}" kept ` +
          `(its sha256 is not status.result.diffSha256), so it is not printed: someone changed it after the run wrote it. ` +
          `Do not approve a publish of this run; the run's bounded copy is in status.result.diff ` +
          `(kubectl get codingrun ${name} -o jsonpath='{.status.result.diff}'); find out who changed the ConfigMap.`,
      );
    }
    if (text !== undefined) return { text };
  }
  if (!result) {
    const phase = run.status?.phase ?? 'Pending';
    throw new DiffUnavailableError(
      `codingrun "${name}" has no diff yet (phase ${phase}); the diff is written when the run finishes — watch it with kubectl codingrun get ${name} -w`,
    );
  }
  const missing = result.diffConfigMap
    ? configMap
      ? `ConfigMap ${result.diffConfigMap} holds no "${DIFF_KEY}" or "${DIFF_GZIP_KEY}" key`
      : `ConfigMap ${result.diffConfigMap} was not found`
    : undefined;
  if (result.diffTruncated) {
    return {
      text: result.diff,
      warning: `warning: ${missing ?? 'no full-diff ConfigMap is named'}; printing the first ${result.diff.length} characters from status.result.diff only`,
    };
  }
  return missing ? { text: result.diff, warning: `warning: ${missing}; printing status.result.diff (complete)` } : { text: result.diff };
}
