// workers/apply-budget.ts: what `git apply` of a sandbox's diff would hold and search, judged
// before it runs from git's lists of the patches and the sizes and lines of the files they read.
// The figures behind the bounds were measured with real git (the file's header); the adapters'
// tests (apply-diff.test.ts, publish-git.test.ts) run it for real.
import { describe, expect, it } from 'vitest';
import {
  APPLY_BUDGET,
  applyCostRefusal,
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
const tree = (files: Record<string, { bytes: number; lines: number }>, complete = true): NamedFiles => ({
  files: new Map(Object.entries(files)),
  complete,
});

describe('patchesRead', () => {
  it("pairs each patch with the path git reads: a rename's source, a deletion's path, a new file's own", () => {
    // As git 2.39 prints them: --numstat names each patch by its new name, -R --numstat by its old one, last patch first.
    expect(patchesRead('0\t0\tnew name\0', '0\t0\told name\0')).toEqual([{ path: 'old name', added: 0 }]);
    expect(patchesRead('0\t1\tgone\0' + '1\t0\tfresh\0' + '2\t1\tedited\0', '1\t2\tedited\0' + '0\t1\tfresh\0' + '1\t0\tgone\0')).toEqual([
      { path: 'gone', added: 0 },
      { path: 'fresh', added: 1 },
      { path: 'edited', added: 2 },
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
  const cases: Array<{ name: string; patches: PatchRead[]; named: NamedFiles; diff?: string; refused: RegExp | undefined }> = [
    {
      name: 'a one-line edit of a small file fits',
      patches: [{ path: 'a', added: 1 }],
      named: tree({ a: { bytes: 4096, lines: 100 } }),
      refused: undefined,
    },
    {
      name: 'files git would hold at once past the bound are refused, however small the diff (a rename reads its source whole)',
      patches: Array.from({ length: 5 }, (_, index) => ({ path: `big${index}`, added: 0 })),
      named: tree(Object.fromEntries(Array.from({ length: 5 }, (_, index) => [`big${index}`, { bytes: 14 * MiB, lines: 1000 }]))),
      refused: /read 5 file\(s\) of 70\.0 MiB in all, which git apply holds in memory at once .* over the 64\.0 MiB/,
    },
    {
      name: 'four of those fit',
      patches: Array.from({ length: 4 }, (_, index) => ({ path: `big${index}`, added: 0 })),
      named: tree(Object.fromEntries(Array.from({ length: 4 }, (_, index) => [`big${index}`, { bytes: 14 * MiB, lines: 1000 }]))),
      refused: undefined,
    },
    {
      name: "one file of many short lines is refused for git's table of its lines (16 bytes each)",
      patches: [{ path: 'blank', added: 1 }],
      named: tree({ blank: { bytes: 8 * MiB, lines: 8 * MiB } }),
      refused: /about 136\.\d MiB, over the 64\.0 MiB/,
    },
    {
      name: 'a reading stopped at the bound is refused with what was read',
      patches: [{ path: 'huge', added: 1 }],
      named: tree({ huge: { bytes: 900 * MiB, lines: 0 } }, false),
      refused: /files of more than 900\.0 MiB in all/,
    },
    {
      name: 'a new file reads nothing from the tree',
      patches: [{ path: 'fresh', added: 1 }],
      named: tree({}),
      refused: undefined,
    },
    {
      name: 'a path read by two patches (a type change) is held once',
      patches: [
        { path: 'link', added: 0 },
        { path: 'link', added: 1 },
      ],
      named: tree({ link: { bytes: 40 * MiB, lines: 1 } }),
      refused: undefined,
    },
    {
      name: 'hunks git could look for at every line of a large file are refused',
      patches: [{ path: 'log', added: 0 }],
      named: tree({ log: { bytes: 2 * MiB, lines: 1_000_000 } }),
      diff: edit(
        'log',
        Array.from({ length: 12_000 }, () => 'a'),
      ),
      refused: /compare 1200\d+ lines, .* over the 10000000000/,
    },
    {
      name: 'a few hunk lines in that file fit',
      patches: [{ path: 'log', added: 1 }],
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
      [{ path: 'blank', added: 0 }],
      tree({ blank: { bytes: 8 * MiB, lines: 8 * MiB } }),
    );
    expect(refusal).toMatch(/it was not applied; apply it outside the operator \(kubectl codingrun diff prints it\)/);
  });

  it('bounds git to a share of the chart’s 1 GiB that eight jobs at once can take', () => {
    expect(APPLY_BUDGET.memoryBytes * 8).toBeLessThanOrEqual(512 * MiB);
  });
});
