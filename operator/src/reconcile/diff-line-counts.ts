// Added and deleted lines of a unified diff as git prints it, counted once for both who show
// them: status.result (countDiff) and a publish's approval (filesOf). `--- a/x` and `+++ b/x`
// name a file only in its header, between `diff --git` and its first `@@`; inside a hunk they
// are a deleted line that began with `-- ` (an SQL, Lua or Haskell comment) and an added one
// that began with `++ `. Reading every `--- ` line as a header showed deleting a file's
// comments as no deletion at all. Pure.

export interface LineCounts {
  insertions: number;
  deletions: number;
}

export interface DiffLineCounts extends LineCounts {
  /** One per `diff --git`, in the diff's order. The totals also count lines before the first (a diff without git's headers). */
  files: LineCounts[];
}

export function diffLineCounts(diff: string): DiffLineCounts {
  const counts: DiffLineCounts = { insertions: 0, deletions: 0, files: [] };
  // Text before the first `diff --git` is read as a header too, so the first file of a diff
  // without git's headers is named by its `--- a`/`+++ b` pair; the files after it would count
  // their pair as lines. Every diff counted here is git's own (`git diff`), which has them.
  let inHeader = true;
  for (const line of diff.split('\n')) {
    if (line.startsWith('diff --git ')) {
      inHeader = true;
      counts.files.push({ insertions: 0, deletions: 0 });
    } else if (line.startsWith('@@')) inHeader = false;
    else if (inHeader && (line.startsWith('+++ ') || line.startsWith('--- '))) continue;
    else if (line.startsWith('+')) {
      counts.insertions++;
      if (counts.files.length > 0) counts.files.at(-1)!.insertions++;
    } else if (line.startsWith('-')) {
      counts.deletions++;
      if (counts.files.length > 0) counts.files.at(-1)!.deletions++;
    }
  }
  return counts;
}
