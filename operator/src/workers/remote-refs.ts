// Which commit a remote names for a run's revision, read from `git ls-remote` (pure). The clone
// cache (clone-cache.ts) keeps trees by commit; this is how a run finds the commit it would
// have fetched, asked of the remote with the run's own credential, without fetching it.
//
// A name is resolved as `git fetch origin <name>` resolves it against the remote's refs: the
// first of these that the remote has (git's ref_rev_parse_rules), so `main` is a tag before it
// is a branch, as in git. A full commit id is taken only when the remote advertises it as the
// tip of a ref: that the run may read the repository does not say that it may read every
// commit in it (servers hide refs a user may not see), and a cached tree would skip asking.
//
// A revision that resolves through an annotated tag also names the tag object: its fetch brings
// that object (the tag's name, tagger and message) with the commit, so the cache hands such a
// run only an archive holding that same tag object, one the remote showed this run.
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

/** The commit a revision names, and the annotated tag object it names it through (absent for a branch, a lightweight tag or a commit id). */
export interface NamedCommit {
  commit: string;
  tag: string | undefined;
}

/**
 * What `ref` names: a tag's peeled commit and the tag object where the remote gives a peeled
 * line (`<ref>^{}`: the ref's own id is then a tag object), else the ref's own id as the commit.
 */
function namedBy(refs: ReadonlyMap<string, string>, ref: string): NamedCommit | undefined {
  const own = refs.get(ref);
  if (own === undefined) return undefined;
  const peeled = refs.get(`${ref}^{}`);
  return peeled === undefined ? { commit: own, tag: undefined } : { commit: peeled, tag: own };
}

/**
 * The commit the remote names for `revision` (the remote's HEAD when absent), with the tag object
 * when it goes through an annotated tag, or undefined when it names none: an unknown name, or a
 * commit id that is no ref's tip (the run then clones, and the fetch says what is wrong, as it
 * would have). A full id that is a tag object's (some ref's own id, peeled) names that tag.
 */
export function commitForRevision(refs: ReadonlyMap<string, string>, revision: string | undefined): NamedCommit | undefined {
  const wanted = revision ?? 'HEAD';
  if (isCommitId(wanted)) {
    let named: NamedCommit | undefined;
    for (const [ref, id] of refs) {
      if (id !== wanted) continue;
      const found = ref.endsWith('^{}') ? { commit: id, tag: undefined } : namedBy(refs, ref)!;
      // Each ref says the same of one id (a tag object is never a commit); should two disagree, none is taken.
      if (named && (named.commit !== found.commit || named.tag !== found.tag)) return undefined;
      named = found;
    }
    return named;
  }
  const ref = refNamedBy(refs, wanted);
  return ref === undefined ? undefined : namedBy(refs, ref);
}

/** The ref a name (not a commit id) stands for among the remote's refs, under git's rules (a tag before a branch), if any. */
export function refNamedBy(refs: ReadonlyMap<string, string>, name: string): string | undefined {
  return NAME_RULES.map((rule) => rule(name)).find((ref) => refs.has(ref));
}
