// What a run's unified diff (status.result.diff or its diff ConfigMap) says about each file:
// which paths it touches, and the lines of each file after the change as far as the hunks show
// them (added and context lines). The file graders read this; they never see the whole file,
// so a file grader judges the change, not text the change left alone. Pure.

export interface FileChange {
  /** Path after the change (for a deletion, the path it had). */
  path: string;
  /** Path before the change, when the diff renames or deletes. */
  oldPath?: string;
  kind: 'added' | 'deleted' | 'modified' | 'renamed';
  /** Hunks of the file after the change: each hunk's context and added lines, in order. */
  afterHunks: string[][];
  /** Lines the change removed. */
  removed: string[];
  /** Binary files carry no lines. */
  binary: boolean;
}

const unquote = (path: string) => (path.startsWith('"') && path.endsWith('"') ? (JSON.parse(path) as string) : path);
const stripPrefix = (path: string) => unquote(path).replace(/^[ab]\//, '');

/** The files of a `git diff` in order; text outside file sections is ignored. */
export function parseDiffFiles(diff: string): FileChange[] {
  const files: FileChange[] = [];
  let file: FileChange | undefined;
  let hunk: string[] | undefined;
  for (const line of diff.split('\n')) {
    const header = /^diff --git (\S+|"[^"]*") (\S+|"[^"]*")$/.exec(line);
    if (header) {
      file = { path: stripPrefix(header[2]!), kind: 'modified', afterHunks: [], removed: [], binary: false };
      const oldPath = stripPrefix(header[1]!);
      if (oldPath !== file.path) file.oldPath = oldPath;
      files.push(file);
      hunk = undefined;
      continue;
    }
    if (!file) continue;
    if (hunk === undefined) {
      if (line.startsWith('new file mode')) file.kind = 'added';
      else if (line.startsWith('deleted file mode')) file.kind = 'deleted';
      else if (line.startsWith('rename from ')) {
        file.kind = 'renamed';
        file.oldPath = line.slice('rename from '.length);
      } else if (line.startsWith('rename to ')) file.path = line.slice('rename to '.length);
      else if (line.startsWith('Binary files ')) file.binary = true;
    }
    if (line.startsWith('@@')) {
      hunk = [];
      file.afterHunks.push(hunk);
      continue;
    }
    if (hunk === undefined) continue;
    if (line.startsWith('+')) hunk.push(line.slice(1));
    else if (line.startsWith(' ')) hunk.push(line.slice(1));
    else if (line.startsWith('-')) file.removed.push(line.slice(1));
  }
  return files;
}

/** Whether the change touches `path` (as its old or its new name). */
export const touches = (files: readonly FileChange[], path: string) => files.some((file) => file.path === path || file.oldPath === path);

/** The change's view of `path` after it: undefined when the change does not touch it. */
export const fileAfter = (files: readonly FileChange[], path: string) =>
  files.find((file) => file.path === path && file.kind !== 'deleted');
