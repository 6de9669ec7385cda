// What the approver of a publish is shown (and approves by its sha256): where the change goes,
// the pull request's body as it will be posted (the agent's final message by default, which
// the approver once never saw), and the whole diff's summary, with the files by name, what the
// change does to each and their line counts. It must fit in status.pendingApproval.input
// (LIMITS.pendingApprovalInput, as JSON): a run that made many files with long paths once made
// an input the API server refused (422), and the run ended AgentFailed with that raw message.
// It is measured as the API server stores that string (text/stored-json-bytes.ts): Go escapes
// the input's JSON again, `<`, `>` and `&` to six bytes each and each `"` to two, so a body or
// paths of `<` that fit as UTF-8 took several times the bound in etcd.
// So the list stops where the input would not fit, and the rest are counted; a long body is
// cut, its sha256 naming the whole.
// Paths are read as git prints them, quoted or not (evals/diff-files.ts). Each file says what
// happens to it, its old name and a mode that is not a plain file's: a file listed by its path
// alone hid what the push does (a rename out of .github/ showed as a new name with +0 −0, and
// the push deleted .github/CODEOWNERS; a symlink or a chmod +x looked like any text file). Pure.
import { createHash } from 'node:crypto';
import { LIMITS, type ParsedCodingRun } from '../api/index.ts';
import { parseDiffFiles, type FileChange } from '../evals/diff-files.ts';
import { approvalInputJson } from '../reconcile/approval-answer.ts';
import { diffLineCounts, type LineCounts } from '../reconcile/diff-line-counts.ts';
import type { KeptDiff } from '../reconcile/kept-diff.ts';
import { storedTextBytes } from '../text/stored-json-bytes.ts';
import { describedBase } from './decide-publish.ts';
import type { PublishPlan } from './publish-plan.ts';

/** Files an approver is shown by name (with what happens to each and their line counts); more are counted. */
export const APPROVAL_FILES_MAX = 200;

/**
 * The most of the pull request's body an approver is shown, as the API server stores it in the
 * input (its JSON, escaped again by Go): a 16 KiB summary of control characters is 96 KiB as
 * JSON, and one of `<` 96 KiB stored, more than the input may hold. Past it the body is cut and
 * the rest counted; bodySha256 names the whole body either way.
 */
export const APPROVAL_BODY_MAX_BYTES = 24 * 1024;

/** The body as shown: whole, or its beginning within APPROVAL_BODY_MAX_BYTES and how many characters follow. */
function shownBody(body: string): { body: string; moreCharacters?: number } {
  const jsonBytes = (text: string) => storedTextBytes(JSON.stringify(text));
  if (jsonBytes(body) <= APPROVAL_BODY_MAX_BYTES) return { body };
  let fits = 0;
  let over = body.length;
  while (over - fits > 1) {
    const middle = Math.floor((fits + over) / 2);
    if (jsonBytes(body.slice(0, middle)) <= APPROVAL_BODY_MAX_BYTES) fits = middle;
    else over = middle;
  }
  // Not between the two halves of a surrogate pair.
  const code = body.charCodeAt(fits - 1);
  if (code >= 0xd800 && code <= 0xdbff) fits--;
  return { body: body.slice(0, fits), moreCharacters: body.length - fits };
}

/** A plain file's mode: the one mode an approver is not shown, unless the change sets it. */
const PLAIN_FILE_MODE = '100644';

export interface ApprovalFile {
  /** The path after the change (for a deletion, the path it had). */
  path: string;
  kind: FileChange['kind'];
  /** The old path of a rename (the push removes it) or the source of a copy. */
  from?: string;
  /** The mode after the change when it is not a plain file's (120000 symlink, 160000 submodule, 100755 executable) or the change sets it. */
  mode?: string;
  /** The mode before the change, when the change sets another. */
  fromMode?: string;
  insertions: number;
  deletions: number;
}

/** What the change does to one file, as the approver is shown it. A deletion's kind says all: it leaves no mode. */
function approvalFile(file: FileChange | undefined, counts: LineCounts): ApprovalFile {
  if (!file) return { path: '', kind: 'modified', ...counts };
  const modeChanged = file.oldMode !== undefined && file.oldMode !== file.newMode;
  const showMode = file.kind !== 'deleted' && file.newMode !== undefined && (file.newMode !== PLAIN_FILE_MODE || modeChanged);
  return {
    path: file.path,
    kind: file.kind,
    ...(file.oldPath !== undefined && (file.kind === 'renamed' || file.kind === 'copied') ? { from: file.oldPath } : {}),
    ...(showMode ? { mode: file.newMode } : {}),
    ...(showMode && modeChanged ? { fromMode: file.oldMode } : {}),
    ...counts,
  };
}

/** Per file of a unified diff: its path, what happens to it and its line counts (what an approver reads before the whole diff). */
export function filesOf(diff: string): ApprovalFile[] {
  const files = parseDiffFiles(diff);
  return diffLineCounts(diff).files.map((counts, index) => approvalFile(files[index], counts));
}

/**
 * sha256 (hex) of a pull request body's UTF-8 bytes: the approval's bodySha256, which the
 * publish job compares with the body it is about to post.
 */
export function bodySha256(body: string): string {
  return createHash('sha256').update(body, 'utf8').digest('hex');
}

/** The body as the approval's input names it: what is shown of it, and the sha256 of all of it. */
function bodyView(body: string) {
  const { body: shown, moreCharacters } = shownBody(body);
  return {
    body: shown,
    ...(moreCharacters !== undefined ? { bodyMoreCharacters: moreCharacters } : {}),
    bodySha256: bodySha256(body),
  };
}

/** The approval's input: the list of files as long as the whole fits in status (as JSON, as stored). */
export function publishApprovalInput(run: ParsedCodingRun, plan: PublishPlan, kept: KeptDiff, sha256: string) {
  const files = filesOf(kept.diff);
  const pullRequest = plan.pullRequest && {
    base: describedBase(plan, run.spec.repository.revision),
    draft: plan.pullRequest.draft,
    labels: plan.pullRequest.labels,
    ...bodyView(plan.pullRequest.body),
  };
  const inputWith = (shown: number) => ({
    repository: run.spec.repository.url,
    branch: plan.branch,
    title: plan.title,
    ...(pullRequest ? { pullRequest } : {}),
    diff: {
      configMap: kept.configMap,
      sha256,
      filesChanged: kept.filesChanged,
      insertions: kept.insertions,
      deletions: kept.deletions,
      files: files.slice(0, shown),
      ...(files.length > shown ? { moreFiles: files.length - shown } : {}),
    },
  });
  const fits = (shown: number) => storedTextBytes(approvalInputJson(inputWith(shown))) <= LIMITS.pendingApprovalInput;
  // The most files that fit, or none. Halving, not one file less at a time: each try measures the
  // whole input, and a file more always makes it larger (an entry is longer than moreFiles).
  let shown = 0;
  let over = Math.min(files.length, APPROVAL_FILES_MAX) + 1;
  while (over - shown > 1) {
    const middle = Math.floor((shown + over) / 2);
    if (fits(middle)) shown = middle;
    else over = middle;
  }
  return inputWith(shown);
}
