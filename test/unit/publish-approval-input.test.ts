// What a publish's approver is shown: the pull request's body as it will be posted (and its
// sha256), each file by name with what happens to it (kind, old name, mode) and its line counts, git-quoted names
// read as the names they are, and a list that stops where the input would no longer fit in
// status.pendingApproval.input (the API server refused the status write before, and the run
// ended AgentFailed with its raw message). Pure.
import { createHash } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseArguments } from '../../operator/src/cli/parse-arguments.ts';
import { stdoutText } from '../../operator/src/cli/exact-output.ts';
import { pendingApprovalLines } from '../../operator/src/cli/format-runs.ts';
import { codingRunSpec, LIMITS, type CodingRun, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import {
  APPROVAL_BODY_MAX_BYTES,
  APPROVAL_FILES_MAX,
  filesOf,
  publishApprovalInput,
} from '../../operator/src/publish/publish-approval-input.ts';
import { defaultBody } from '../../operator/src/publish/publish-plan.ts';
import { approvalInputJson } from '../../operator/src/reconcile/approval-answer.ts';
import { countDiff, type KeptDiff } from '../../operator/src/reconcile/kept-diff.ts';
import { storedTextBytes } from '../../operator/src/text/stored-json-bytes.ts';
import { createRepository, git } from '../support/git-fixture.ts';
import { pendingBash } from '../support/pending-approval.ts';

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
      { path: 'café.txt', kind: 'modified', insertions: 2, deletions: 1 },
      { path: 'b.txt', kind: 'added', insertions: 1, deletions: 0 },
    ]);
  });

  it('counts deleted `-- ` and added `++ ` lines inside a hunk to their file, not as headers', () => {
    const diff =
      'diff --git a/db/001.sql b/db/001.sql\nindex 1..2 100644\n--- a/db/001.sql\n+++ b/db/001.sql\n' +
      '@@ -1,3 +1,2 @@\n--- only admins may drop this table\n-- keep: audit\n+++ new header\n DROP TABLE audit;\n' +
      newFile('b.txt');
    expect(filesOf(diff)).toEqual([
      { path: 'db/001.sql', kind: 'modified', insertions: 1, deletions: 2 },
      { path: 'b.txt', kind: 'added', insertions: 1, deletions: 0 },
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

  it('fits the input in status as the API server stores it, where `<` and `&` take six bytes: a body and paths made of them', () => {
    // 16 KiB of `<` is 16 KiB as JSON, but 96 KiB stored: the input string is escaped again by Go.
    const body = '<'.repeat(16 * 1024);
    const withBody = { ...plan, pullRequest: { title: 'Fix it', body, draft: false, labels: [] } };
    const diff = Array.from({ length: APPROVAL_FILES_MAX }, (_, index) => newFile(`${'&'.repeat(290)}/${index}.txt`)).join('');
    const input = publishApprovalInput(run, withBody, kept(diff), 'a'.repeat(64));
    expect(storedTextBytes(approvalInputJson(input))).toBeLessThanOrEqual(LIMITS.pendingApprovalInput);
    const shown = input.pullRequest!;
    expect(body.startsWith(shown.body)).toBe(true);
    expect(shown.body.length + shown.bodyMoreCharacters!).toBe(body.length);
    expect(storedTextBytes(JSON.stringify(shown.body))).toBeLessThanOrEqual(APPROVAL_BODY_MAX_BYTES);
    expect(input.diff.files.length).toBeGreaterThan(0);
    expect(input.diff.files.length + (input.diff.moreFiles ?? 0)).toBe(APPROVAL_FILES_MAX);
  });

  it('lists every file of a small change', () => {
    const input = publishApprovalInput(run, plan, kept(newFile('a.txt') + newFile('b.txt')), 'a'.repeat(64));
    expect(input.diff.files.map((file) => file.path)).toEqual(['a.txt', 'b.txt']);
    expect(input.diff.moreFiles).toBeUndefined();
  });

  it('names what happens to each file: a rename out of .github by its old name, a deletion, a symlink, an executable, a submodule', () => {
    const dir = mkdtempSync(join(tmpdir(), 'chamvi-approval-files-'));
    try {
      createRepository(dir, {
        '.github/CODEOWNERS': '* @acme/owners\n',
        'app.js': 'a\n',
        'gone.txt': 'bye\n',
        'run.sh': 'echo\n',
        'plain.sh': 'echo\n',
      });
      chmodSync(join(dir, 'plain.sh'), 0o755);
      git(['add', 'plain.sh'], dir);
      git(['commit', '-qm', 'executable'], dir);
      git(['mv', '.github/CODEOWNERS', 'docs-notes.txt'], dir);
      writeFileSync(join(dir, 'app.js'), 'a\nb\n');
      git(['rm', '-q', 'gone.txt'], dir);
      chmodSync(join(dir, 'run.sh'), 0o755);
      chmodSync(join(dir, 'plain.sh'), 0o644);
      symlinkSync('/etc/passwd', join(dir, 'link'));
      // A submodule pointer: a repository of its own inside the workspace, added as git adds one.
      createRepository(join(dir, 'vendor/lib'), { 'lib.js': 'x\n' });
      git(['add', 'vendor/lib'], dir);
      git(['add', '-N', '.'], dir);
      // As workers/take-diff.ts asks git for it: renames on, copies off.
      const diff = git(['-c', 'diff.renames=true', 'diff', '--no-color', '--no-ext-diff', 'HEAD'], dir);
      expect(diff).toContain('rename from .github/CODEOWNERS');
      const byPath = new Map(filesOf(diff).map((file) => [file.path, file]));
      expect(byPath.get('docs-notes.txt')).toEqual({
        path: 'docs-notes.txt',
        kind: 'renamed',
        from: '.github/CODEOWNERS',
        insertions: 0,
        deletions: 0,
      });
      expect(byPath.get('app.js')).toEqual({ path: 'app.js', kind: 'modified', insertions: 1, deletions: 0 });
      expect(byPath.get('gone.txt')).toEqual({ path: 'gone.txt', kind: 'deleted', insertions: 0, deletions: 1 });
      expect(byPath.get('link')).toEqual({ path: 'link', kind: 'added', mode: '120000', insertions: 1, deletions: 0 });
      expect(byPath.get('run.sh')).toEqual({
        path: 'run.sh',
        kind: 'modified',
        mode: '100755',
        fromMode: '100644',
        insertions: 0,
        deletions: 0,
      });
      expect(byPath.get('plain.sh')).toEqual({
        path: 'plain.sh',
        kind: 'modified',
        mode: '100644',
        fromMode: '100755',
        insertions: 0,
        deletions: 0,
      });
      expect(byPath.get('vendor/lib')).toEqual({ path: 'vendor/lib', kind: 'added', mode: '160000', insertions: 1, deletions: 0 });
      expect(byPath.size).toBe(7);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names a copy as copied, from its source', () => {
    const diff = 'diff --git a/src.txt b/copy.txt\nsimilarity index 100%\ncopy from src.txt\ncopy to copy.txt\n';
    expect(filesOf(diff)).toEqual([{ path: 'copy.txt', kind: 'copied', from: 'src.txt', insertions: 0, deletions: 0 }]);
  });

  it('lists as many renames as fit in status, counting their old names too, and counts the rest', () => {
    const rename = (index: number) =>
      `diff --git a/${'o'.repeat(290)}/${index}.txt b/${'n'.repeat(290)}/${index}.txt\nsimilarity index 100%\n` +
      `rename from ${'o'.repeat(290)}/${index}.txt\nrename to ${'n'.repeat(290)}/${index}.txt\n`;
    const diff = Array.from({ length: APPROVAL_FILES_MAX }, (_, index) => rename(index)).join('');
    const input = publishApprovalInput(run, plan, kept(diff), 'a'.repeat(64));
    expect(Buffer.byteLength(approvalInputJson(input), 'utf8')).toBeLessThanOrEqual(LIMITS.pendingApprovalInput);
    expect(input.diff.files.every((file) => file.from?.startsWith('o'))).toBe(true);
    expect(input.diff.files.length + (input.diff.moreFiles ?? 0)).toBe(APPROVAL_FILES_MAX);
    expect(input.diff.moreFiles).toBeGreaterThan(0);
  });

  it("security #11.5 shows a hidden character in a moved file's old name escaped, as in its new name", () => {
    const diff =
      'diff --git "a/.github/\\342\\200\\256CODEOWNERS" b/notes.txt\nsimilarity index 100%\nrename from ".github/\\342\\200\\256CODEOWNERS"\nrename to notes.txt\n';
    const input = JSON.stringify(publishApprovalInput(run, plan, kept(diff), 'a'.repeat(64)));
    const waiting = {
      ...run,
      status: { phase: 'WaitingForApproval', pendingApproval: { ...pendingBash(input), id: 'publish', toolName: 'publish' } },
    };
    // What `kubectl codingrun get NAME` prints on a terminal.
    const shown = stdoutText(parseArguments(['get', 'fix', '-n', 'team']), { isTTY: true, warn: () => {} }).show(
      pendingApprovalLines(waiting as CodingRun, 'team').join('\n'),
    );
    expect(shown).toContain('"from":".github/<U+202E>CODEOWNERS"');
    expect(shown).not.toContain('\u202e');
  });
});
