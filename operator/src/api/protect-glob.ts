// The grammar of a spec.verify.protect glob: a path pattern relative to the repository root,
// written once as CEL (so `kubectl apply` refuses a bad one) and once as a predicate (the
// operator re-validates every run). What a glob matches is decided in the toolbox contract
// (glob-pattern.ts, protected-paths.ts); here only what may be written.
import { compileGlob } from '../../../sandbox-image/toolbox/contract/glob-pattern.ts';
import { InvalidGlobError } from '../../../sandbox-image/toolbox/contract/invalid-glob-error.ts';
import type { CrossFieldRule } from './cross-field-rules.ts';
import { GIT_DIRECTORY_GLOB, GIT_GLOB_MESSAGE, namesGitDirectory } from './git-directory-glob.ts';

/** Longest glob. */
export const PROTECT_GLOB_MAX = 256;
/** Most globs one run may list. */
export const PROTECT_MAX = 64;

// No control characters (a path with a newline cannot be shown or matched honestly), and
// not absolute: a glob names paths inside the repository, nothing else.
export const PROTECT_GLOB_PATTERN = '^[^/\\x00-\\x1f][^\\x00-\\x1f]*$';
export const PROTECT_GLOB_PATTERN_MESSAGE =
  'must be a path pattern relative to the repository root, such as test/** or package.json, without a leading / or control characters';

export const protectGlobRules: readonly CrossFieldRule<string>[] = [
  {
    rule: "!(self == '..' || self.startsWith('../') || self.endsWith('/..') || self.contains('/../'))",
    message: 'a protect glob may not contain a .. segment: name paths inside the repository, such as test/**',
    reason: 'FieldValueInvalid',
    holds: (glob) => !glob.split('/').includes('..'),
  },
  {
    rule: "!(self == '.' || self.startsWith('./') || self.endsWith('/.') || self.contains('/./') || self.contains('//'))",
    message: 'write a protect glob without . segments or doubled slashes, such as test/** rather than ./test//**',
    reason: 'FieldValueInvalid',
    holds: (glob) => !glob.split('/').some((segment, index, all) => segment === '.' || (segment === '' && index < all.length - 1)),
  },
  {
    // The workspace's own .git is never pruned or restored (git-directory-glob.ts): a glob
    // naming it would protect nothing there, and the model could still set core.fsmonitor,
    // assume-unchanged or skip-worktree under a check that asks git about the tree.
    rule: `!self.matches('${GIT_DIRECTORY_GLOB}')`,
    message: GIT_GLOB_MESSAGE,
    reason: 'FieldValueInvalid',
    holds: (glob) => !namesGitDirectory(glob),
  },
];

/**
 * Why a glob the pattern and rules allow still names no paths (a { never closed, a range
 * written backwards such as [z-a]), or undefined. CEL cannot parse a glob, so the API server
 * takes these and the operator fails the run InvalidSpec; the toolbox would refuse every call.
 */
export function protectGlobProblem(glob: string): string | undefined {
  try {
    compileGlob(glob.replace(/\/+$/, ''));
    return undefined;
  } catch (error) {
    if (InvalidGlobError.isInstance(error)) return error.message;
    throw error;
  }
}
