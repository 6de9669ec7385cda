// PATH for a command the operator (or `run --local`) starts inside or beside a clone of the
// run's repository: only its absolute entries. An empty or relative entry (`.`, `bin`,
// `node_modules/.bin`, common in a developer's PATH) is looked up from the child's working
// directory, which is the clone: a repository that committed `bin/tar` or
// `node_modules/.bin/git` had it run, in local mode on the user's own machine, with no
// approval asked. Pure.
import path from 'node:path';

export function absolutePath(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  return value
    .split(path.delimiter)
    .filter((entry) => path.isAbsolute(entry))
    .join(path.delimiter);
}
