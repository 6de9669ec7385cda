// PATH for a command the operator (or `run --local`) starts inside or beside a clone of the
// run's repository: only its absolute entries. An empty or relative entry (`.`, `bin`,
// `node_modules/.bin`, common in a developer's PATH) is looked up from the child's working
// directory, which is the clone: a repository that committed `bin/tar` or
// `node_modules/.bin/git` had it run, in local mode on the user's own machine, with no
// approval asked. Pure.
import path from 'node:path';

/**
 * What a PATH with no absolute entry left becomes. Not '' (node's spawn and /bin/sh search
 * an empty PATH from the working directory) and not unset (bash's compiled-in default PATH
 * may end in `.`): the two directories every Unix keeps git, tar and sh in.
 */
export const SYSTEM_PATH = ['/usr/bin', '/bin'].join(path.delimiter);

/**
 * Absolute entries that may still lead to the working directory: /proc/self/cwd is it, and
 * /dev/fd/N may be a descriptor open on it. Nothing a real PATH needs lives under either.
 */
const VIRTUAL_ROOTS = ['/proc', '/dev'];

const isVirtual = (entry: string) => {
  const normalized = path.posix.normalize(entry);
  return VIRTUAL_ROOTS.some((root) => normalized === root || normalized.startsWith(`${root}/`));
};

export function absolutePath(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const kept = value.split(path.delimiter).filter((entry) => path.isAbsolute(entry) && !isVirtual(entry));
  return kept.length > 0 ? kept.join(path.delimiter) : SYSTEM_PATH;
}
