// What the approver of a publish is shown (and approves by its sha256): where the change goes
// and the whole diff's summary, with the files by name and their line counts. It must fit in
// status.pendingApproval.input (LIMITS.pendingApprovalInput, as JSON): a run that made many
// files with long paths once made an input the API server refused (422), and the run ended
// AgentFailed with that raw message. So the list stops where the input would not fit, and the
// rest are counted. Paths are read as git prints them, quoted or not (evals/diff-files.ts).
// Pure.
import { LIMITS, type ParsedCodingRun } from '../api/index.ts';
import { parseDiffFiles } from '../evals/diff-files.ts';
import { approvalInputJson } from '../reconcile/approval-answer.ts';
import { diffLineCounts } from '../reconcile/diff-line-counts.ts';
import type { KeptDiff } from '../reconcile/kept-diff.ts';
import { pullRequestBase } from './decide-publish.ts';
import type { PublishPlan } from './publish-plan.ts';

/** Files an approver is shown by name (with their line counts); more are counted. */
export const APPROVAL_FILES_MAX = 200;

export interface ApprovalFile {
  path: string;
  insertions: number;
  deletions: number;
}

/** Per file of a unified diff: its path and line counts (what an approver reads before the whole diff). */
export function filesOf(diff: string): ApprovalFile[] {
  const paths = parseDiffFiles(diff).map((file) => file.path);
  return diffLineCounts(diff).files.map((counts, index) => ({ path: paths[index] ?? '', ...counts }));
}

/** The approval's input: the list of files as long as the whole fits in status (as JSON). */
export function publishApprovalInput(run: ParsedCodingRun, plan: PublishPlan, kept: KeptDiff, sha256: string) {
  const files = filesOf(kept.diff);
  const inputWith = (shown: number) => ({
    repository: run.spec.repository.url,
    branch: plan.branch,
    title: plan.title,
    ...(plan.pullRequest
      ? {
          pullRequest: {
            base: pullRequestBase(plan, run.spec.repository.revision) ?? "(the repository's default branch)",
            draft: plan.pullRequest.draft,
            labels: plan.pullRequest.labels,
          },
        }
      : {}),
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
  let shown = Math.min(files.length, APPROVAL_FILES_MAX);
  while (shown > 0 && Buffer.byteLength(approvalInputJson(inputWith(shown)), 'utf8') > LIMITS.pendingApprovalInput) shown--;
  return inputWith(shown);
}
