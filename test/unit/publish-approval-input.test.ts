// What a publish's approver is shown: the pull request's body as it will be posted (and its
// sha256), each file by name with its line counts, git-quoted names
// read as the names they are, and a list that stops where the input would no longer fit in
// status.pendingApproval.input (the API server refused the status write before, and the run
// ended AgentFailed with its raw message). Pure.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { codingRunSpec, LIMITS, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import {
  APPROVAL_BODY_MAX_BYTES,
  APPROVAL_FILES_MAX,
  filesOf,
  publishApprovalInput,
} from '../../operator/src/publish/publish-approval-input.ts';
import { defaultBody } from '../../operator/src/publish/publish-plan.ts';
import { approvalInputJson } from '../../operator/src/reconcile/approval-answer.ts';
import { countDiff, type KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';

const run: ParsedCodingRun = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'fix', namespace: 'team', uid: 'uid-1' },
  spec: codingRunSpec.parse({
    task: 'Fix it.',
    repository: { url: 'https://github.com/acme/webapp.git' },
    model: { provider: 'scripted', scriptRef: { name: 's' } },
  }),
};
const plan = { branch: 'chamvi/fix', title: 'Fix it', commitMessage: 'Fix it\n' };
const newFile = (path: string) => `diff --git a/${path} b/${path}\nnew file mode 100644\n--- /dev/null\n+++ b/${path}\n@@ -0,0 +1 @@\n+x\n`;
const kept = (diff: string): KeptDiff => ({ source: 'final', diff, truncated: false, ...countDiff(diff), configMap: 'fix-diff' });

describe('the approval input of a publish', () => {
  it('reads a git-quoted name as the name it is, and counts its lines as its own', () => {
    const diff =
      'diff --git "a/caf\\303\\251.txt" "b/caf\\303\\251.txt"\nindex 1..2 100644\n--- "a/caf\\303\\251.txt"\n+++ "b/caf\\303\\251.txt"\n' +
      '@@ -1 +1,2 @@\n-old\n+new\n+more\n' +
      newFile('b.txt');
    expect(filesOf(diff)).toEqual([
      { path: 'café.txt', insertions: 2, deletions: 1 },
      { path: 'b.txt', insertions: 1, deletions: 0 },
    ]);
  });

  it('counts deleted `-- ` and added `++ ` lines inside a hunk to their file, not as headers', () => {
    const diff =
      'diff --git a/db/001.sql b/db/001.sql\nindex 1..2 100644\n--- a/db/001.sql\n+++ b/db/001.sql\n' +
      '@@ -1,3 +1,2 @@\n--- only admins may drop this table\n-- keep: audit\n+++ new header\n DROP TABLE audit;\n' +
      newFile('b.txt');
    expect(filesOf(diff)).toEqual([
      { path: 'db/001.sql', insertions: 1, deletions: 2 },
      { path: 'b.txt', insertions: 1, deletions: 0 },
    ]);
  });

  it('lists as many files as fit in status, and counts the rest', () => {
    const diff = Array.from({ length: APPROVAL_FILES_MAX }, (_, index) => newFile(`${'d'.repeat(290)}/${index}.txt`)).join('');
    const input = publishApprovalInput(run, plan, kept(diff), 'a'.repeat(64));
    expect(Buffer.byteLength(approvalInputJson(input), 'utf8')).toBeLessThanOrEqual(LIMITS.pendingApprovalInput);
    expect(input.diff.files.length).toBeGreaterThan(100);
    expect(input.diff.files.length + (input.diff.moreFiles ?? 0)).toBe(APPROVAL_FILES_MAX);
    expect(input.diff.moreFiles).toBeGreaterThan(0);
  });

  it("names the pull request's body as it will be posted, with the sha256 of the whole", () => {
    const body = defaultBody({
      namespace: 'team',
      name: 'fix',
      uid: 'uid-1',
      task: 'Fix it.',
      publish: { branch: 'chamvi/{run}', pullRequest: { draft: false, labels: [] } },
      summary: 'Fixed it. Closes other/repo#1 @org/team',
      filesChanged: 1,
      insertions: 1,
      deletions: 0,
      steps: 1,
      totalTokens: 10,
    });
    const withBody = { ...plan, pullRequest: { title: 'Fix it', body, draft: false, labels: [] } };
    const input = publishApprovalInput(run, withBody, kept(newFile('a.txt')), 'a'.repeat(64));
    expect(input.pullRequest).toEqual({
      base: "(the repository's default branch)",
      draft: false,
      labels: [],
      body,
      bodySha256: createHash('sha256').update(body).digest('hex'),
    });
  });

  it('shows the beginning of a body too long to show whole, counts the rest, and still fits in status', () => {
    // 16 KiB of control characters (what status keeps of a summary) is 96 KiB as JSON.
    const body = '\u0001'.repeat(16 * 1024);
    const withBody = { ...plan, pullRequest: { title: 'Fix it', body, draft: false, labels: [] } };
    const input = publishApprovalInput(run, withBody, kept(newFile('a.txt')), 'a'.repeat(64));
    expect(Buffer.byteLength(approvalInputJson(input), 'utf8')).toBeLessThanOrEqual(LIMITS.pendingApprovalInput);
    const shown = input.pullRequest!;
    expect(body.startsWith(shown.body)).toBe(true);
    expect(shown.body.length + shown.bodyMoreCharacters!).toBe(body.length);
    expect(Buffer.byteLength(JSON.stringify(shown.body))).toBeLessThanOrEqual(APPROVAL_BODY_MAX_BYTES);
    expect(shown.bodySha256).toBe(createHash('sha256').update(body).digest('hex'));
    expect(input.diff.files).toHaveLength(1);
  });

  it('lists every file of a small change', () => {
    const input = publishApprovalInput(run, plan, kept(newFile('a.txt') + newFile('b.txt')), 'a'.repeat(64));
    expect(input.diff.files.map((file) => file.path)).toEqual(['a.txt', 'b.txt']);
    expect(input.diff.moreFiles).toBeUndefined();
  });
});
