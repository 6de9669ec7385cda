// What a run's unified diff (status.result.diff or its diff ConfigMap) says about each file:
// which paths it touches, and the lines of each file after the change as far as the hunks show
// them (added and context lines). The file graders read this; they never see the whole file,
// so a file grader judges the change, not text the change left alone. Paths are read as git
// prints them, quoted or not (git-quoted-path.ts): a name the model chose never makes this
// throw, which would stall the whole eval's grading. A file's lines are its text only when git
// printed them as text: not for a file git took as binary (`Binary files … differ`, which a
// `-diff` attribute asks for), nor for a symbolic link, whose one line is its target. Pure.
import { unquoteGitPath } from './git-quoted-path.ts';

export interface FileChange {
  /** Path after the change (for a deletion, the path it had). */
  path: string;
  /** Path before the change, when the diff renames or copies (the copy's source). */
  oldPath?: string;
  /** `copied` only in a diff made with copy detection, which the operator's own never is (workers/take-diff.ts). */
  kind: 'added' | 'deleted' | 'modified' | 'renamed' | 'copied';
  /** Hunks of the file after the change: each hunk's context and added lines, in order. */
  afterHunks: string[][];
  /** Lines the change removed. */
  removed: string[];
  /** Binary files carry no lines. */
  binary: boolean;
  /** The file's mode after the change, as the diff states it (`new file mode`, `new mode`, `index … <mode>`). */
  newMode?: string;
  /** The file's mode before the change, when the change sets another (`old mode`). */
  oldMode?: string;
}

/** git's mode of a symbolic link: the link's "text" in a diff is its target, not the file it names. */
const SYMLINK_MODE = '120000';

/** `index <old>..<new> <mode>`: the mode of a file whose mode the change left alone. */
const INDEX_MODE = /^index [0-9a-f]+\.\.[0-9a-f]+ ([0-7]+)$/;

const stripPrefix = (path: string) => unquoteGitPath(path).replace(/^[ab]\//, '');
/** A header's two fields, each plain or git-quoted (a quoted one may hold escaped quotes). */
const HEADER = /^diff --git ("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)$/;

/**
 * The old and new field of a header line. git leaves a name with spaces (and nothing it
 * quotes) unquoted, so `diff --git a/my file b/my file` has no unambiguous split; its two
 * halves are the same name but for the prefix, as git's own parser assumes. A rename of such a
 * name has no split at all: its names come from the lines after the header.
 */
function headerFields(line: string): [string, string] | undefined {
  const fields = HEADER.exec(line);
  if (fields) return [fields[1]!, fields[2]!];
  const rest = line.slice('diff --git '.length);
  const half = (rest.length - 1) / 2;
  if (!Number.isInteger(half) || rest[half] !== ' ') return undefined;
  const [before, after] = [rest.slice(0, half), rest.slice(half + 1)];
  return before.startsWith('a/') && after.startsWith('b/') && before.slice(2) === after.slice(2) ? [before, after] : undefined;
}

/** The name of a `---` or `+++` line: undefined for /dev/null; git ends a name with spaces with a tab. */
const sideName = (line: string) => {
  const name = line.slice(4).replace(/\t$/, '');
  return name === '/dev/null' ? undefined : stripPrefix(name);
};

/** The files of a `git diff` in order; text outside file sections is ignored. */
export function parseDiffFiles(diff: string): FileChange[] {
  const files: FileChange[] = [];
  let file: FileChange | undefined;
  let hunk: string[] | undefined;
  for (const line of diff.split('\n')) {
    if (line.startsWith('diff --git ')) {
      const header = headerFields(line);
      file = { path: header ? stripPrefix(header[1]) : '', kind: 'modified', afterHunks: [], removed: [], binary: false };
      const oldPath = header ? stripPrefix(header[0]) : '';
      if (oldPath !== file.path) file.oldPath = oldPath;
      files.push(file);
      hunk = undefined;
      continue;
    }
    if (!file) continue;
    if (hunk === undefined) {
      if (line.startsWith('new file mode ')) {
        file.kind = 'added';
        file.newMode = line.slice('new file mode '.length);
      } else if (line.startsWith('new mode ')) file.newMode = line.slice('new mode '.length);
      else if (line.startsWith('old mode ')) file.oldMode = line.slice('old mode '.length);
      else if (INDEX_MODE.test(line)) file.newMode = INDEX_MODE.exec(line)![1]!;
      else if (line.startsWith('deleted file mode')) file.kind = 'deleted';
      else if (line.startsWith('rename from ')) {
        file.kind = 'renamed';
        file.oldPath = unquoteGitPath(line.slice('rename from '.length));
      } else if (line.startsWith('rename to ')) file.path = unquoteGitPath(line.slice('rename to '.length));
      else if (line.startsWith('copy from ')) {
        file.kind = 'copied';
        file.oldPath = unquoteGitPath(line.slice('copy from '.length));
      } else if (line.startsWith('copy to ')) file.path = unquoteGitPath(line.slice('copy to '.length));
      else if (line.startsWith('Binary files ') || line === 'GIT binary patch') file.binary = true;
      else if (line.startsWith('--- ') && !file.path) file.path = sideName(line) ?? '';
      else if (line.startsWith('+++ ')) file.path = sideName(line) ?? file.path;
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

/**
 * Whether `name` is `path` or lies under it: a grader's path names a file or a directory. The
 * eval's paths are canonical (no `./`, `//`, `.` or `..` segments, no trailing `/`; api/
 * coding-eval.ts), as git prints a diff's, so comparing the strings is comparing the paths.
 */
const isWithin = (name: string, path: string) => name === path || name.startsWith(`${path}/`);

/**
 * The first name the change touches at `path` or under it, by a file's old name or its new one
 * (a rename changes both places); undefined when it touches nothing there.
 */
export function touching(files: readonly FileChange[], path: string): string | undefined {
  for (const file of files) for (const name of [file.oldPath, file.path]) if (name !== undefined && isWithin(name, path)) return name;
  return undefined;
}

/** The files the change leaves at `path` or under it, as it leaves them: none when it writes none there. */
export const filesAfter = (files: readonly FileChange[], path: string) =>
  files.filter((file) => isWithin(file.path, path) && file.kind !== 'deleted');

/**
 * Whether the change's lines of the file are its text: false for a file git printed as binary
 * (no lines at all) and for a symbolic link (its one line is the target it points to).
 */
export const isReadableAsText = (file: FileChange) => !file.binary && file.newMode !== SYMLINK_MODE;
