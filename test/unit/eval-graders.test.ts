// The CodingEval graders as a table: one run's evidence in, each grader's verdict out. Every
// grader has a row that passes and a row that fails, and the graders that prove an absence or
// count fail closed when the transcript has gaps.
import { describe, expect, it } from 'vitest';
import type { GraderSpec } from '../../operator/src/api/coding-eval.ts';
import { parseDiffFiles } from '../../operator/src/evals/diff-files.ts';
import { grade, gradeAttempt } from '../../operator/src/evals/graders.ts';
import type { RunEvidence } from '../../operator/src/evals/run-evidence.ts';

const DIFF = `diff --git a/src/greet.ts b/src/greet.ts
index 1111111..2222222 100644
--- a/src/greet.ts
+++ b/src/greet.ts
@@ -1,3 +1,3 @@
 // greeting
-export function sayHi(name: string) {
+export function greet(name: string) {
   return \`Hello, \${name}\`;
diff --git a/test/greet.test.ts b/test/greet.test.ts
deleted file mode 100644
index 3333333..0000000
--- a/test/greet.test.ts
+++ /dev/null
@@ -1,1 +0,0 @@
-assert(sayHi('a'));
diff --git a/NOTES.md b/NOTES.md
new file mode 100644
index 0000000..4444444
--- /dev/null
+++ b/NOTES.md
@@ -0,0 +1,2 @@
+renamed sayHi
+to greet
`;

const evidence = (over: Partial<RunEvidence> = {}): RunEvidence => ({
  phase: 'Succeeded',
  answer: 'Renamed sayHi to greet; tests pass.',
  answerCut: false,
  steps: 4,
  calls: [
    { tool: 'read_file', ok: true },
    { tool: 'read_file', ok: false },
    { tool: 'edit_file', ok: true },
    { tool: 'bash', ok: false },
  ],
  transcriptGaps: [],
  files: parseDiffFiles(DIFF),
  verificationPassed: true,
  ...over,
});

const g = (spec: Partial<GraderSpec> & Pick<GraderSpec, 'type'>): GraderSpec => spec as GraderSpec;
const GAPPED = { transcriptGaps: ['entry s000003 cannot be read'] };

describe('graders', () => {
  it.each<[string, GraderSpec, Partial<RunEvidence>, boolean, RegExp?]>([
    ['verify passes', g({ type: 'verify' }), {}, true],
    ['verify fails', g({ type: 'verify' }), { verificationPassed: false }, false, /verify command failed/],
    ['verify without a result fails', g({ type: 'verify' }), { verificationPassed: undefined }, false, /no verification result/],
    ['file-contains in an added line', g({ type: 'file-contains', path: 'src/greet.ts', text: 'function greet(' }), {}, true],
    ['file-contains across lines of a hunk', g({ type: 'file-contains', path: 'NOTES.md', text: 'sayHi\nto greet' }), {}, true],
    ['file-contains in a context line', g({ type: 'file-contains', path: 'src/greet.ts', text: 'return `Hello' }), {}, true],
    [
      'file-contains misses a removed line',
      g({ type: 'file-contains', path: 'src/greet.ts', text: 'sayHi' }),
      {},
      false,
      /does not contain/,
    ],
    [
      'file-contains of an untouched file',
      g({ type: 'file-contains', path: 'README.md', text: 'x' }),
      {},
      false,
      /does not write README.md/,
    ],
    ['file-contains of a deleted file', g({ type: 'file-contains', path: 'test/greet.test.ts', text: 'assert' }), {}, false],
    [
      'file-contains without a diff',
      g({ type: 'file-contains', path: 'src/greet.ts', text: 'greet' }),
      { files: undefined },
      false,
      /could not be read/,
    ],
    ['file-excludes passes', g({ type: 'file-excludes', path: 'src/greet.ts', text: 'sayHi' }), {}, true],
    ['file-excludes fails', g({ type: 'file-excludes', path: 'NOTES.md', text: 'sayHi' }), {}, false, /contains the text/],
    ['file-unchanged passes', g({ type: 'file-unchanged', path: 'package.json' }), {}, true],
    [
      'file-unchanged fails for a deletion',
      g({ type: 'file-unchanged', path: 'test/greet.test.ts' }),
      {},
      false,
      /touches test\/greet.test.ts/,
    ],
    ['used-tool passes', g({ type: 'used-tool', tool: 'edit_file' }), {}, true],
    ['used-tool fails', g({ type: 'used-tool', tool: 'write_file' }), {}, false, /never called write_file/],
    ['used-tool found despite gaps', g({ type: 'used-tool', tool: 'edit_file' }), GAPPED, true],
    ['not-used-tool passes', g({ type: 'not-used-tool', tool: 'write_file' }), {}, true],
    ['not-used-tool fails', g({ type: 'not-used-tool', tool: 'bash' }), {}, false, /called bash 1 time/],
    ['not-used-tool fails closed on gaps', g({ type: 'not-used-tool', tool: 'write_file' }), GAPPED, false, /incomplete/],
    ['tool-never-failed passes', g({ type: 'tool-never-failed', tool: 'edit_file' }), {}, true],
    ['tool-never-failed fails', g({ type: 'tool-never-failed', tool: 'read_file' }), {}, false, /1 call\(s\) of read_file/],
    ['max-tool-calls passes at the bound', g({ type: 'max-tool-calls', max: 4 }), {}, true],
    ['max-tool-calls fails past it', g({ type: 'max-tool-calls', max: 3 }), {}, false, /4 tool calls, more than 3/],
    ['max-tool-calls of one tool', g({ type: 'max-tool-calls', tool: 'read_file', max: 1 }), {}, false, /2 calls of read_file/],
    ['answer-contains passes', g({ type: 'answer-contains', text: 'tests pass' }), {}, true],
    ['answer-contains fails', g({ type: 'answer-contains', text: 'all green' }), {}, false],
    ['answer-excludes passes', g({ type: 'answer-excludes', text: 'could not' }), {}, true],
    ['answer-excludes fails', g({ type: 'answer-excludes', text: 'sayHi' }), {}, false],
    // A cut answer: the forbidden text may be in what was cut, so it never passes excludes.
    ['answer-excludes fails on a cut answer', g({ type: 'answer-excludes', text: 'could not' }), { answerCut: true }, false],
    ['answer-contains passes on a cut answer that holds it', g({ type: 'answer-contains', text: 'tests pass' }), { answerCut: true }, true],
    ['max-turns passes', g({ type: 'max-turns', max: 4 }), {}, true],
    ['max-turns fails', g({ type: 'max-turns', max: 3 }), {}, false, /4 turns, more than 3/],
  ])('%s', (_name, grader, over, ok, why) => {
    const verdict = grade(grader, evidence(over));
    expect(verdict.ok).toBe(ok);
    if (why) expect(verdict.why).toMatch(why);
  });

  it('labels a grader by its name, else its type and argument', () => {
    expect(grade(g({ type: 'used-tool', tool: 'grep' }), evidence()).grader).toBe('used-tool grep');
    expect(grade(g({ type: 'verify', name: 'tests' }), evidence()).grader).toBe('tests');
  });
});

/** The change git prints for a file `-diff` marks binary (a repository's .gitattributes, or .git/info/attributes). */
const BINARY_CONFIG = `diff --git a/src/config.ts b/src/config.ts
index 9c3d026..71dfe2c 100644
Binary files a/src/config.ts and b/src/config.ts differ
`;

/** A file made a symbolic link to another that holds the text: its deletion, then the link (its one line is the target). */
const LINKED_CONFIG = `diff --git a/src/config.ts b/src/config.ts
deleted file mode 100644
index 9c3d026..0000000
--- a/src/config.ts
+++ /dev/null
@@ -1 +0,0 @@
-export const config = { debug: false };
diff --git a/src/config.ts b/src/config.ts
new file mode 120000
index 0000000..06e3cef
--- /dev/null
+++ b/src/config.ts
@@ -0,0 +1 @@
+real.ts
\\ No newline at end of file
diff --git a/src/real.ts b/src/real.ts
new file mode 100644
index 0000000..71dfe2c
--- /dev/null
+++ b/src/real.ts
@@ -0,0 +1 @@
+export const config = { debug: true };
`;

/** A symbolic link whose target the change moves: its mode is on the index line. */
const RETARGETED_LINK = `diff --git a/src/config.ts b/src/config.ts
index 06e3cef..1a2b3c4 120000
--- a/src/config.ts
+++ b/src/config.ts
@@ -1 +1 @@
-real.ts
+debug: true
`;

/** A rename out of test/ and a modification under test/unit/, beside an untouched sibling name. */
const TREE_MOVES = `diff --git a/test/old.test.js b/spec/old.test.js
similarity index 100%
rename from test/old.test.js
rename to spec/old.test.js
diff --git a/test/unit/a.test.js b/test/unit/a.test.js
index 1111111..2222222 100644
--- a/test/unit/a.test.js
+++ b/test/unit/a.test.js
@@ -1 +1 @@
-expect(x).toBe(1)
+expect(true).toBe(true)
diff --git a/testing.md b/testing.md
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/testing.md
@@ -0,0 +1 @@
+notes
`;

const of = (diff: string): Partial<RunEvidence> => ({ files: parseDiffFiles(diff) });
const NOT_TEXT = /the change to src\/config\.ts cannot be read as text \(binary or a symbolic link\)/;

describe('file graders on a change that is not text', () => {
  // A model could hide its text from the grader by adding `src/config.ts -diff` to
  // .git/info/attributes, or by linking the graded file to another one.
  it.each<[string, GraderSpec, string]>([
    [
      'file-excludes of a file git shows as binary',
      g({ type: 'file-excludes', path: 'src/config.ts', text: 'debug: true' }),
      BINARY_CONFIG,
    ],
    [
      'file-excludes of a file made a symbolic link',
      g({ type: 'file-excludes', path: 'src/config.ts', text: 'debug: true' }),
      LINKED_CONFIG,
    ],
    [
      'file-excludes of a symbolic link given a new target',
      g({ type: 'file-excludes', path: 'src/config.ts', text: 'x' }),
      RETARGETED_LINK,
    ],
    ['file-excludes of a directory holding such a file', g({ type: 'file-excludes', path: 'src', text: 'nothing' }), BINARY_CONFIG],
    ['file-contains of a file git shows as binary', g({ type: 'file-contains', path: 'src/config.ts', text: 'debug' }), BINARY_CONFIG],
    // The link's one line is its target: text there is not the file's.
    [
      'file-contains of a link whose target holds the text',
      g({ type: 'file-contains', path: 'src/config.ts', text: 'real.ts' }),
      LINKED_CONFIG,
    ],
    [
      'file-contains of a link whose new target holds the text',
      g({ type: 'file-contains', path: 'src/config.ts', text: 'debug: true' }),
      RETARGETED_LINK,
    ],
  ])('%s fails and says why', (_name, grader, diff) => {
    const verdict = grade(grader, evidence(of(diff)));
    expect(verdict).toMatchObject({ ok: false, why: expect.stringMatching(NOT_TEXT) });
  });

  it('still grades the other files of the change: only the graded path must be text', () => {
    expect(grade(g({ type: 'file-excludes', path: 'src/real.ts', text: 'debug: false' }), evidence(of(LINKED_CONFIG))).ok).toBe(true);
    expect(grade(g({ type: 'file-excludes', path: 'src/real.ts', text: 'debug: true' }), evidence(of(LINKED_CONFIG))).ok).toBe(false);
    expect(grade(g({ type: 'file-unchanged', path: 'README.md' }), evidence(of(BINARY_CONFIG))).ok).toBe(true);
    expect(grade(g({ type: 'file-unchanged', path: 'src/config.ts' }), evidence(of(BINARY_CONFIG))).ok).toBe(false);
  });

  it('reads the mode each file has after the change', () => {
    const modes = (diff: string) => parseDiffFiles(diff).map((file) => [file.path, file.kind, file.newMode, file.binary]);
    expect(modes(LINKED_CONFIG)).toEqual([
      ['src/config.ts', 'deleted', undefined, false],
      ['src/config.ts', 'added', '120000', false],
      ['src/real.ts', 'added', '100644', false],
    ]);
    expect(modes(RETARGETED_LINK)).toEqual([['src/config.ts', 'modified', '120000', false]]);
    expect(modes(BINARY_CONFIG)).toEqual([['src/config.ts', 'modified', '100644', true]]);
    expect(modes('diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n')).toEqual([['run.sh', 'modified', '100755', false]]);
    expect(modes('diff --git a/x b/x\nold mode 100644\nnew mode 120000\n@@ -1 +1 @@\n-a\n+b\n')).toEqual([
      ['x', 'modified', '120000', false],
    ]);
  });
});

describe('file graders on a directory', () => {
  it.each<[string, GraderSpec, boolean, RegExp?]>([
    [
      'file-unchanged of a directory fails when a file under it changes',
      g({ type: 'file-unchanged', path: 'test/unit' }),
      false,
      /touches test\/unit\/a\.test\.js, under test\/unit/,
    ],
    [
      'file-unchanged of a directory fails when a file is renamed out of it',
      g({ type: 'file-unchanged', path: 'test' }),
      false,
      /touches test\/old\.test\.js, under test/,
    ],
    [
      'file-unchanged of a directory fails when a file is renamed into it',
      g({ type: 'file-unchanged', path: 'spec' }),
      false,
      /touches spec\/old\.test\.js/,
    ],
    [
      'file-unchanged of a renamed file fails by its old name',
      g({ type: 'file-unchanged', path: 'test/old.test.js' }),
      false,
      /touches test\/old\.test\.js$/,
    ],
    ['file-unchanged of a renamed file fails by its new name', g({ type: 'file-unchanged', path: 'spec/old.test.js' }), false],
    // A directory is a whole segment: test is not a prefix of testing.md.
    ['file-unchanged of a name that only starts the same passes', g({ type: 'file-unchanged', path: 'tes' }), true],
    ['file-unchanged of an untouched directory passes', g({ type: 'file-unchanged', path: 'src' }), true],
    [
      'file-excludes of a directory fails on a file under it',
      g({ type: 'file-excludes', path: 'test', text: 'toBe(true)' }),
      false,
      /test\/unit\/a\.test\.js as changed contains the text/,
    ],
    [
      'file-excludes of a directory passes when no file under it has the text',
      g({ type: 'file-excludes', path: 'test', text: 'notes' }),
      true,
    ],
    ['file-contains of a directory passes on a file under it', g({ type: 'file-contains', path: 'test', text: 'toBe(true)' }), true],
    [
      'file-contains of a directory it does not write fails',
      g({ type: 'file-contains', path: 'src', text: 'x' }),
      false,
      /does not write src/,
    ],
  ])('%s', (_name, grader, ok, why) => {
    const verdict = grade(grader, evidence(of(TREE_MOVES)));
    expect(verdict.ok).toBe(ok);
    if (why) expect(verdict.why).toMatch(why);
  });
});

describe('gradeAttempt', () => {
  const graders = [g({ type: 'verify' }), g({ type: 'not-used-tool', tool: 'write_file' })];

  it('passes a run that Succeeded with every grader passing', () => {
    expect(gradeAttempt(graders, evidence())).toEqual({ passed: true, failed: [] });
  });

  it("fails a run that did not succeed with the run's reason, whatever the graders say", () => {
    expect(gradeAttempt(graders, evidence({ phase: 'Failed', reason: 'VerificationFailed' }))).toMatchObject({
      passed: false,
      failureReason: 'VerificationFailed',
    });
  });

  // Anyone who may write ConfigMaps can write a record for an attempt's name and spec, both computable.
  it.each<[string, Partial<RunEvidence>]>([
    ['Succeeded', { phase: 'Succeeded', reason: 'AlreadyFinished', steps: 0, calls: [] }],
    ['Failed', { phase: 'Failed', reason: 'AlreadyFinished' }],
  ])('fails ForeignRun, whatever the graders say, a run that ended %s from a chamvi-finished-runs record without running', (_, ended) => {
    const grade = gradeAttempt(graders, evidence(ended));
    expect(grade).toMatchObject({ passed: false, failureReason: 'ForeignRun' });
    expect(grade.failed.map((verdict) => verdict.why)).toEqual([expect.stringMatching(/did not run.*chamvi-finished-runs/)]);
  });

  it('fails a run whose grader fails with grader:<label> of the first one', () => {
    const grade = gradeAttempt(graders, evidence({ verificationPassed: false, calls: [{ tool: 'write_file', ok: true }] }));
    expect(grade.passed).toBe(false);
    expect(grade.failureReason).toBe('grader:verify');
    expect(grade.failed.map((verdict) => verdict.grader)).toEqual(['verify', 'not-used-tool write_file']);
  });
});

describe('parseDiffFiles', () => {
  it('reads renames and quoted paths', () => {
    const files = parseDiffFiles(
      'diff --git a/old.ts b/new.ts\nsimilarity index 90%\nrename from old.ts\nrename to new.ts\n' +
        'diff --git "a/with space.txt" "b/with space.txt"\nnew file mode 100644\n@@ -0,0 +1 @@\n+x\n',
    );
    expect(files.map((file) => [file.path, file.oldPath, file.kind])).toEqual([
      ['new.ts', 'old.ts', 'renamed'],
      ['with space.txt', undefined, 'added'],
    ]);
  });

  it('reads the paths git quotes: octal bytes of UTF-8, C escapes, and names with spaces left unquoted', () => {
    const files = parseDiffFiles(
      [
        'diff --git "a/caf\\303\\251.txt" "b/caf\\303\\251.txt"',
        'new file mode 100644',
        '@@ -0,0 +1 @@',
        '+x',
        'diff --git "a/bell\\001\\"q\\"\\\\.txt" "b/bell\\001\\"q\\"\\\\.txt"',
        'deleted file mode 100644',
        'diff --git a/my notes.md b/my notes.md',
        '@@ -1 +1 @@',
        '-a',
        '+b',
        'diff --git a/old name.md b/new name.md',
        'similarity index 100%',
        'rename from old name.md',
        'rename to new name.md',
        'diff --git "a/\\351t\\351.md" "b/\\351t\\351.md"',
        '--- "a/\\351t\\351.md"',
        '+++ "b/\\351t\\351.md"',
      ].join('\n'),
    );
    expect(files.map((file) => [file.path, file.oldPath, file.kind])).toEqual([
      ['café.txt', undefined, 'added'],
      ['bell\u0001"q"\\.txt', undefined, 'deleted'],
      ['my notes.md', undefined, 'modified'],
      ['new name.md', 'old name.md', 'renamed'],
      // Latin-1 bytes are not UTF-8: shown as U+FFFD, never a throw.
      ['\ufffdt\ufffd.md', undefined, 'modified'],
    ]);
    expect(files[2]!.afterHunks).toEqual([['b']]);
  });
});
