// Which commit a remote names for a run's revision, read from `git ls-remote` (pure). The clone
// cache (clone-cache.ts) keeps trees by commit; this is how a run finds the commit it would
// have fetched, asked of the remote with the run's own credential, without fetching it. And
// which ref a clone's fetch took for the revision (refFetched), which the run's state keeps for
// publishing to check the pull request's base against.
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

/** Whether a revision is a name that stands for a ref of its own: not absent, HEAD (the remote's, no ref of its own) or a commit id. */
function namesARef(revision: string | undefined): revision is string {
  return revision !== undefined && revision !== 'HEAD' && !isCommitId(revision);
}

/** The ref a revision stands for among the remote's refs (refNamedBy), as refFetched reads a clone's: none for HEAD or a commit id. */
export function revisionRefIn(refs: ReadonlyMap<string, string>, revision: string | undefined): string | undefined {
  return namesARef(revision) ? refNamedBy(refs, revision) : undefined;
}

/**
 * How `git fetch` describes a ref it fetched in FETCH_HEAD, after the id and the merge marker
 * (builtin/fetch.c, the note fmt-merge-msg reads): `branch 'release' of `, `tag 'v1' of `,
 * `remote-tracking branch 'o/x' of `, another ref in full as `'refs/pull/1/head' of `. The URL
 * follows. Each ref has its own, and none is the start of another's: a ref name holds no space
 * (git-ref-name.ts), so the ` of ` after it ends it.
 */
function fetchDescription(ref: string): string {
  for (const [prefix, kind] of [
    ['refs/heads/', 'branch'],
    ['refs/tags/', 'tag'],
    ['refs/remotes/', 'remote-tracking branch'],
  ] as const) {
    if (ref.startsWith(prefix)) return `${kind} '${ref.slice(prefix.length)}' of `;
  }
  return `'${ref}' of `;
}

/**
 * The ref `git fetch origin <revision>` took on the remote (`refs/heads/release`,
 * `refs/tags/release`), read from the FETCH_HEAD it wrote: the one of the refs the name may
 * stand for (git's rules, as refNamedBy) that the fetch's line describes. What the fetch took,
 * not a second look at the remote, which could name another ref by then. Undefined for no
 * revision or HEAD (the remote's HEAD, no ref of its own), a commit id, or a line none matches.
 */
export function refFetched(fetchHead: string, revision: string | undefined): string | undefined {
  if (!namesARef(revision)) return undefined;
  // `<id>\t<not-for-merge or nothing>\t<description><url>`: one line for one ref fetched.
  const description = fetchHead.split('\n', 1)[0]!.split('\t').slice(2).join('\t');
  return NAME_RULES.map((rule) => rule(revision)).find((ref) => ref.startsWith('refs/') && description.startsWith(fetchDescription(ref)));
}
