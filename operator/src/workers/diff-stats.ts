// Numbers for status.result from `git diff --shortstat`: "3 files changed, 40 insertions(+), 3 deletions(-)".
export interface DiffStats {
  filesChanged: number;
  insertions: number;
  deletions: number;
}

export function parseShortstat(text: string): DiffStats {
  // The line comes from the sandbox: a long one of digits took these patterns seconds.
  const line = text.slice(0, 200);
  const number = (pattern: RegExp) => Number(pattern.exec(line)?.[1] ?? 0);
  return {
    filesChanged: number(/(\d+) files? changed/),
    insertions: number(/(\d+) insertions?\(\+\)/),
    deletions: number(/(\d+) deletions?\(-\)/),
  };
}

export { cutAtLine } from '../reconcile/cut-at-line.ts';
