// Numbers for status.result from `git diff --shortstat`: "3 files changed, 40 insertions(+), 3 deletions(-)".
export interface DiffStats {
  filesChanged: number;
  insertions: number;
  deletions: number;
}

export function parseShortstat(text: string): DiffStats {
  // The line comes from the sandbox: a long one of digits took these patterns seconds, and a
  // count of 1e20 failed the status write. Counts are kept to what a status holds.
  const line = text.slice(0, 200);
  const number = (pattern: RegExp) => Math.min(Number(pattern.exec(line)?.[1] ?? 0), 2 ** 31 - 1);
  return {
    filesChanged: number(/(\d+) files? changed/),
    insertions: number(/(\d+) insertions?\(\+\)/),
    deletions: number(/(\d+) deletions?\(-\)/),
  };
}

export { cutAtLine } from '../reconcile/cut-at-line.ts';
