// spec.verify.protect against the run's diff. The protected paths are restored before each check
// (restore-protected.ts), and docs/verify.md tells the approver they show no change: yet the
// diff is taken after the check, from a sandbox whose code ran meanwhile (a module the tests
// import that rewrites them at exit, a clean filter, git tricks in the sandbox's .git). So the
// diff itself is checked: finalize ends a run whose diff changes one VerificationFailed, and
// publishing refuses it. The paths are git's own parse of the diff (diff-patch-lists.ts: both
// sides of a rename or copy), with the paths its `diff --git` headers name, which is what
// status and the publish approval show (evals/diff-files.ts): either naming a protected path
// is a change of it. Matched as the restore and the toolbox's prune match (protected-paths.ts). Pure.
import { protectedPaths } from '../../../sandbox-image/toolbox/contract/protected-paths.ts';
import { parseDiffFiles } from '../evals/diff-files.ts';
import { oneLineText } from '../text/one-line-text.ts';
import type { DiffPatchLists } from './diff-patch-lists.ts';
import { numstatEntries } from './diff-refusal.ts';

/**
 * The paths the diff changes that the globs protect, each once, in the diff's order: of each
 * patch, the path git writes (`lists.forward`), the one it reads (`lists.reversed`, listed last
 * patch first), and the header's. Without `lists` (git could not read a diff cut at the
 * kept bound), the headers' alone.
 */
export function protectedPathsChanged(protect: readonly string[], diff: string, lists: DiffPatchLists | undefined): string[] {
  if (protect.length === 0) return [];
  const isProtected = protectedPaths(protect);
  const forward = lists ? numstatEntries(lists.forward) : [];
  const backward = lists ? numstatEntries(lists.reversed).reverse() : [];
  const headers = parseDiffFiles(diff);
  const changed = new Set<string>();
  for (let at = 0; at < Math.max(forward.length, backward.length, headers.length); at++) {
    const header = headers[at];
    const paths = [...(forward[at]?.paths ?? []), ...(backward[at]?.paths ?? []), ...(header ? [header.oldPath, header.path] : [])];
    for (const path of paths) if (path !== undefined && path !== '' && isProtected(path)) changed.add(path);
  }
  return [...changed];
}

/** A path as a message quotes it: on one line, hidden characters spelled (one-line-text.ts), in quotes, bounded. */
export const shownPath = (path: string) => JSON.stringify(oneLineText(path, 200));

/** What the paths are, for a message: the first, and how many more. */
function named(paths: readonly string[]): string {
  const more = paths.length - 1;
  return `${shownPath(paths[0]!)}${more > 0 ? ` (and ${more} more)` : ''}`;
}

/** Why publishing refuses a diff that changes protected paths (PublishFailed). */
export const protectedChangePublishRefusal = (paths: readonly string[]) =>
  `the diff changes ${named(paths)}, which spec.verify.protect protects, so nothing was pushed: the protected paths are restored ` +
  'before each check and must show no change; read the kept diff, and make the check leave them alone';

/** Why publishing refuses a diff git cannot read when spec.verify.protect is set (PublishFailed). */
export const unreadDiffPublishRefusal = (failed: string) =>
  `${oneLineText(failed, 400)}, so whether it changes spec.verify.protect paths is not known and nothing was pushed`;

/**
 * The message of a run whose check passed (or was not required) but whose diff changes protected
 * paths: the restore did not hold until the diff was taken, so the change is not what was graded.
 */
export const protectedChangeFailure = (paths: readonly string[]) =>
  `Verification failed: the diff changes ${named(paths)}, which spec.verify.protect protects, though the protected paths were ` +
  'restored before the check; the diff is kept. Something in the workspace changed them after the restore ' +
  '(the check itself, or a module or git setting it runs): read the kept diff, and make the check leave protected paths alone.';

/** The message of such a run whose diff git could not read, so protected paths cannot be shown unchanged. */
export const unreadDiffFailure = (failed: string) =>
  `Verification failed: ${oneLineText(failed, 400)}, so the spec.verify.protect paths cannot be shown unchanged; the diff is kept.`;
