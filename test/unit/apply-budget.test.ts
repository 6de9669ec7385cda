// workers/apply-budget.ts: what `git apply` of a sandbox's diff would hold and search, judged
// before it runs from git's lists of the patches and the sizes and lines of the files they read.
// The figures behind the bounds were measured with real git (the file's header); the adapters'
// tests (apply-diff.test.ts, publish-git.test.ts) run it for real.
import { describe, expect, it } from 'vitest';
import {
  APPLY_BUDGET,
  applyBudget,
  applyCostRefusal,
  applyOutOfMemoryRefusal,
  oldLineCounts,
  patchesRead,
  type NamedFiles,
  type PatchRead,
} from '../../operator/src/workers/apply-budget.ts';

const MiB = 1024 * 1024;
const edit = (path: string, old: string[], added: string[] = []) =>
  `diff --git a/${path} b/${path}\n--- a/${path}\n+++ b/${path}\n@@ -1,${old.length} +1,${added.length} @@\n` +
  old.map((line) => `-${line}\n`).join('') +
  added.map((line) => `+${line}\n`).join('');
const edited = (path: string): PatchRead => ({ path, added: 1, deleted: 1 });
const renamed = (path: string): PatchRead => ({ path, added: 0, deleted: 0 });
const tree = (files: Record<string, { bytes: number; lines: number }>, complete = true): NamedFiles => ({
  files: new Map(Object.entries(files)),
  complete,
});

describe('patchesRead', () => {
  it("pairs each patch with the path git reads: a rename's source, a deletion's path, a new file's own", () => {
    // As git 2.39 prints them: --numstat names each patch by its new name, -R --numstat by its old one, last patch first.
    expect(patchesRead('0\t0\tnew name\0', '0\t0\told name\0')).toEqual([{ path: 'old name', added: 0, deleted: 0 }]);
    expect(patchesRead('0\t1\tgone\0' + '1\t0\tfresh\0' + '2\t1\tedited\0', '1\t2\tedited\0' + '0\t1\tfresh\0' + '1\t0\tgone\0')).toEqual([
      { path: 'gone', added: 0, deleted: 1 },
      { path: 'fresh', added: 1, deleted: 0 },
      { path: 'edited', added: 2, deleted: 1 },
    ]);
  });

  it('is undefined when the two lists do not pair up', () => {
    expect(patchesRead('1\t1\ta\0' + '1\t1\tb\0', '1\t1\ta\0')).toBeUndefined();
  });
});

describe('oldLineCounts', () => {
  it("counts each patch's lines a hunk may match (context, removed, empty), not its added lines", () => {
    const diff = edit('a', ['one', 'two'], ['three']) + 'diff --git a/b b/b\n--- a/b\n+++ b/b\n@@ -1,3 +1,3 @@\n keep\n\n-old\n+new\n';
    // The `---` header line is counted too: an upper bound is all the budget needs.
    expect(oldLineCounts(diff)).toEqual([3, 4]);
  });
});

describe('applyCostRefusal', () => {
  const large = (count: number) =>
    tree(Object.fromEntries(Array.from({ length: count }, (_, index) => [`big${index}`, { bytes: 14 * MiB, lines: 1000 }])));
  const cases: Array<{ name: string; patches: PatchRead[]; named: NamedFiles; diff?: string; refused: RegExp | undefined }> = [
    {
      name: 'a one-line edit of a small file fits',
      patches: [edited('a')],
      named: tree({ a: { bytes: 4096, lines: 100 } }),
      refused: undefined,
    },
    {
      name: 'files git would hold at once past the bound are refused, however small the diff (a rename reads its source whole)',
      patches: Array.from({ length: 5 }, (_, index) => renamed(`big${index}`)),
      named: large(5),
      refused: /read 5 file\(s\) of 70\.0 MiB in all, which git apply holds in memory at once .* over the 64\.0 MiB/,
    },
    {
      // Measured: four one-line edits of 14 MiB files needed 83 MiB, the old estimate said 60.
      name: 'four of those edited are refused too: git holds the one it patches twice more',
      patches: Array.from({ length: 4 }, (_, index) => edited(`big${index}`)),
      named: large(4),
      refused: /read 4 file\(s\) of 56\.0 MiB in all, .*about 86\.\d MiB, over the 64\.0 MiB/,
    },
    {
      name: 'two of those edited fit',
      patches: Array.from({ length: 2 }, (_, index) => edited(`big${index}`)),
      named: large(2),
      refused: undefined,
    },
    {
      name: 'a file renamed without a hunk is held as git read it, half again its size, where an edit of it fits',
      patches: [renamed('big0')],
      named: tree({ big0: { bytes: 20 * MiB, lines: 1000 } }),
      refused: /about 72\.\d MiB, over the 64\.0 MiB/,
    },
    {
      name: 'the control: a one-line edit of that file fits',
      patches: [edited('big0')],
      named: tree({ big0: { bytes: 20 * MiB, lines: 1000 } }),
      refused: undefined,
    },
    {
      name: "one file of many short lines is refused for git's table of its lines (24 bytes each, the table grown by half)",
      patches: [edited('blank')],
      named: tree({ blank: { bytes: 8 * MiB, lines: 8 * MiB } }),
      refused: /about 218\.\d MiB, over the 64\.0 MiB/,
    },
    {
      name: 'git apply --index holds the index too, twice its file',
      patches: [edited('a')],
      named: { ...tree({ a: { bytes: 4096, lines: 100 } }), indexBytes: 32 * MiB },
      refused: /about 66\.\d MiB, over the 64\.0 MiB/,
    },
    {
      name: 'an index half that size fits',
      patches: [edited('a')],
      named: { ...tree({ a: { bytes: 4096, lines: 100 } }), indexBytes: 16 * MiB },
      refused: undefined,
    },
    {
      name: 'a reading stopped at the bound is refused with what was read',
      patches: [edited('huge')],
      named: tree({ huge: { bytes: 900 * MiB, lines: 0 } }, false),
      refused: /files of more than 900\.0 MiB in all/,
    },
    {
      name: 'a new file reads nothing from the tree',
      patches: [{ path: 'fresh', added: 1, deleted: 0 }],
      named: tree({}),
      refused: undefined,
    },
    {
      name: 'a path read by two patches (a type change) is held once',
      // Held twice, it would be 2 + 32 + 32 MiB, over the bound.
      patches: [
        { path: 'link', added: 0, deleted: 1 },
        { path: 'link', added: 1, deleted: 0 },
      ],
      named: tree({ link: { bytes: 16 * MiB, lines: 1 } }),
      refused: undefined,
    },
    {
      name: 'hunks git could look for at every line of a large file are refused',
      patches: [{ path: 'log', added: 0, deleted: 12_000 }],
      named: tree({ log: { bytes: 2 * MiB, lines: 1_000_000 } }),
      diff: edit(
        'log',
        Array.from({ length: 12_000 }, () => 'a'),
      ),
      refused: /compare 1200\d+ lines, .* over the 10000000000/,
    },
    {
      name: 'a few hunk lines in that file fit',
      patches: [{ path: 'log', added: 1, deleted: 3 }],
      named: tree({ log: { bytes: 2 * MiB, lines: 1_000_000 } }),
      diff: edit('log', ['a', 'b', 'c'], ['d']),
      refused: undefined,
    },
  ];

  for (const { name, patches, named, diff, refused } of cases) {
    it(name, () => {
      const text = diff ?? patches.map((patch) => edit(patch.path, ['x'], ['y'])).join('');
      const refusal = applyCostRefusal(text, patches, named);
      if (refused) expect(refusal).toMatch(refused);
      else expect(refusal).toBeUndefined();
    });
  }

  it('says what to do instead', () => {
    const refusal = applyCostRefusal(
      edit('blank', ['x']),
      [{ path: 'blank', added: 0, deleted: 1 }],
      tree({ blank: { bytes: 8 * MiB, lines: 8 * MiB } }),
    );
    expect(refusal).toMatch(/it was not applied; apply it outside the operator \(kubectl codingrun diff prints it\)/);
  });

  it('bounds git to a share of the chart’s 1 GiB that eight jobs at once can take', () => {
    expect(APPLY_BUDGET.memoryBytes * 8).toBeLessThanOrEqual(512 * MiB);
  });

  it("takes the memory each git may have (maxGitMemoryBytes) for an apply's: what does not fit 64 MiB fits 256", () => {
    const blank = [edited('blank')];
    const named = tree({ blank: { bytes: 8 * MiB, lines: 8 * MiB } });
    const text = edit('blank', ['x'], ['y']);
    expect(applyBudget(64 * MiB)).toEqual(APPLY_BUDGET);
    expect(applyCostRefusal(text, blank, named, applyBudget(64 * MiB))).toMatch(/over the 64\.0 MiB each git the operator runs may have/);
    expect(applyCostRefusal(text, blank, named, applyBudget(256 * MiB))).toBeUndefined();
  });

  it("words a git apply that ran out of its memory after git's own message, with what to do", () => {
    expect(
      applyOutOfMemoryRefusal('git apply needed more than the 64.0 MiB (67108864 bytes) of memory each git the operator runs may have'),
    ).toBe(
      "git apply needed more than the 64.0 MiB (67108864 bytes) of memory each git the operator runs may have, to hold the files the diff's patches read: " +
        'it was not applied; apply it outside the operator (kubectl codingrun diff prints it), or make the change in runs that each change less',
    );
  });
});

// What git 2.39 needed (the smallest `ulimit -d`, the limit the operator sets, under which the
// apply succeeded; in the work tree, or with --index from a packed repository, whichever needed
// more), measured with real repositories and diffs of these shapes. The estimate must never be
// below it: a diff judged to fit would otherwise fail under the limit. The old estimate was
// below every one of these.
describe('the memory estimate against what git needed', () => {
  /** `count` one-line edits of files of `width`-byte lines, with three lines of context each, as git diff writes them. */
  const oneLineEdits = (count: number, width = 60) => {
    const line = 'x'.repeat(width - 1);
    return Array.from(
      { length: count },
      (_, index) =>
        `diff --git a/f${index} b/f${index}\nindex 0123456..789abcd 100644\n--- a/f${index}\n+++ b/f${index}\n` +
        `@@ -1,4 +1,4 @@\n-${line}\n+Y${line.slice(1)}\n ${line}\n ${line}\n ${line}\n`,
    ).join('');
  };
  const files = (count: number, bytes: number, lines: number) =>
    tree(Object.fromEntries(Array.from({ length: count }, (_, index) => [`f${index}`, { bytes, lines }])));
  const patches = (count: number, patch: (path: string) => PatchRead = edited) =>
    Array.from({ length: count }, (_, index) => patch(`f${index}`));
  const measured: Array<{ shape: string; neededMiB: number; diff: string; patches: PatchRead[]; named: NamedFiles }> = [
    {
      shape: 'git itself: a one-line edit of a 6-byte file',
      neededMiB: 1.7,
      diff: oneLineEdits(1, 6),
      patches: patches(1),
      named: files(1, 6, 1),
    },
    {
      shape: 'a one-line edit of a 60 MiB file of 60-byte lines',
      neededMiB: 169,
      diff: oneLineEdits(1),
      patches: patches(1),
      named: files(1, 60 * MiB, MiB),
    },
    {
      shape: 'a one-line edit of a 16 MiB file of 60-byte lines',
      neededMiB: 46,
      diff: oneLineEdits(1),
      patches: patches(1),
      named: files(1, 16 * MiB, (16 * MiB) / 60),
    },
    {
      shape: '20 hunks in a 16 MiB file (an 11 KiB diff)',
      neededMiB: 53,
      diff: oneLineEdits(20).replace(/diff --git a\/f[1-9]\d* b\/f\d+\n/g, ''),
      patches: patches(1),
      named: files(1, 16 * MiB, (16 * MiB) / 60),
    },
    {
      shape: 'a one-line edit of a 4 MiB file of empty lines',
      neededMiB: 104,
      diff: oneLineEdits(1, 1),
      patches: patches(1),
      named: files(1, 4 * MiB, 4 * MiB),
    },
    {
      shape: '300 one-line edits of 100 KB files',
      neededMiB: 30.8,
      diff: oneLineEdits(300),
      patches: patches(300),
      named: files(300, 100_000, 1666),
    },
    {
      shape: '1 000 one-line edits of 60 KB files',
      neededMiB: 60.2,
      diff: oneLineEdits(1000),
      patches: patches(1000),
      named: files(1000, 60_000, 1000),
    },
    {
      shape: '3 000 one-line edits of 4 KB files',
      neededMiB: 16.5,
      diff: oneLineEdits(3000),
      patches: patches(3000),
      named: files(3000, 3960, 66),
    },
    {
      shape: 'four one-line edits of 14 MiB files',
      neededMiB: 83,
      diff: oneLineEdits(4),
      patches: patches(4),
      named: files(4, 14 * MiB, (14 * MiB) / 60),
    },
    {
      shape: 'four 14 MiB files renamed, no hunk',
      neededMiB: 93.8,
      diff: Array.from(
        { length: 4 },
        (_, index) => `diff --git a/f${index} b/g${index}\nsimilarity index 100%\nrename from f${index}\nrename to g${index}\n`,
      ).join(''),
      patches: patches(4, renamed),
      named: files(4, 14 * MiB, (14 * MiB) / 60),
    },
    {
      shape: 'with --index, a one-line edit of a 14 MiB file stored as a delta of another',
      neededMiB: 48,
      diff: oneLineEdits(1),
      patches: patches(1),
      named: { ...files(1, 14 * MiB, (14 * MiB) / 60), indexBytes: 200 },
    },
    {
      shape: 'with --index, a one-line edit in a tree of 100 000 files (an index of 8.3 MiB)',
      neededMiB: 15,
      diff: oneLineEdits(1, 6),
      patches: patches(1),
      named: { ...files(1, 6, 1), indexBytes: 8_723_165 },
    },
  ];

  for (const { shape, neededMiB, diff, patches: read, named } of measured) {
    it(`is not below what git needed for ${shape} (${neededMiB} MiB)`, () => {
      const budget = { ...APPLY_BUDGET, memoryBytes: Math.floor(neededMiB * MiB) };
      expect(applyCostRefusal(diff, read, named, budget)).toMatch(/which git apply holds in memory at once/);
    });
  }
});
