// Which commit a remote names for a run's revision, read from `git ls-remote` (pure). The clone
// cache (clone-cache.ts) keeps trees by commit; this is how a run finds the commit it would
// have fetched, asked of the remote with the run's own credential, without fetching it.
//
// A name is resolved as `git fetch origin <name>` resolves it against the remote's refs: the
// first of these that the remote has (git's ref_rev_parse_rules), so `main` is a tag before it
// is a branch, as in git. A full commit id is taken only when the remote advertises it as the
// tip of a ref: that the run may read the repository does not say that it may read every
// commit in it (servers hide refs a user may not see), and a cached tree would skip asking.
import { isCommitId } from '../api/commit-id.ts';

/** git's ref_rev_parse_rules: where a short name is looked for, in order. */
const NAME_RULES: readonly ((name: string) => string)[] = [
  (name) => name,
  (name) => `refs/${name}`,
  (name) => `refs/tags/${name}`,
  (name) => `refs/heads/${name}`,
  (name) => `refs/remotes/${name}`,
  (name) => `refs/remotes/${name}/HEAD`,
];

/** `<id>\t<ref>` lines of `git ls-remote` as a map (a peeled tag is `<ref>^{}`). */
export function parseLsRemote(output: string): Map<string, string> {
  const refs = new Map<string, string>();
  for (const line of output.split('\n')) {
    const tab = line.indexOf('\t');
    if (tab < 0) continue;
    const id = line.slice(0, tab);
    if (isCommitId(id)) refs.set(line.slice(tab + 1), id);
  }
  return refs;
}

/** A ref's commit: a tag's peeled commit where the remote gives one, else the ref's own id. */
const commitOf = (refs: ReadonlyMap<string, string>, ref: string) => refs.get(`${ref}^{}`) ?? refs.get(ref);

/**
 * The commit the remote names for `revision` (the remote's HEAD when absent), or undefined when
 * it names none: an unknown name, or a commit id that is no ref's tip (the run then clones,
 * and the fetch says what is wrong, as it would have).
 */
export function commitForRevision(refs: ReadonlyMap<string, string>, revision: string | undefined): string | undefined {
  const wanted = revision ?? 'HEAD';
  if (isCommitId(wanted)) {
    for (const id of refs.values()) if (id === wanted) return wanted;
    return undefined;
  }
  for (const rule of NAME_RULES) {
    const commit = commitOf(refs, rule(wanted));
    if (commit) return commit;
  }
  return undefined;
}
