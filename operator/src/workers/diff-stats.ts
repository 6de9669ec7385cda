// Numbers for status.result from `git diff --shortstat`: "3 files changed, 40 insertions(+), 3 deletions(-)".
export interface DiffStats {
  filesChanged: number;
  insertions: number;
  deletions: number;
}

export function parseShortstat(line: string): DiffStats {
  const number = (pattern: RegExp) => Number(pattern.exec(line)?.[1] ?? 0);
  return {
    filesChanged: number(/(\d+) files? changed/),
    insertions: number(/(\d+) insertions?\(\+\)/),
    deletions: number(/(\d+) deletions?\(-\)/),
  };
}

/** Cuts text to at most `limit` UTF-16 units at a line boundary when one is near. */
export function cutAtLine(text: string, limit: number): { text: string; truncated: boolean } {
  if (text.length <= limit) return { text, truncated: false };
  const cut = text.slice(0, limit);
  const lastNewline = cut.lastIndexOf('\n');
  return { text: lastNewline > limit * 0.8 ? cut.slice(0, lastNewline + 1) : cut, truncated: true };
}
