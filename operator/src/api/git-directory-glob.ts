// Whether a spec.verify.protect glob names the workspace's .git: git's own directory, which the
// toolbox's prune and the operator's restore never walk (the operator's clone is the source, and
// its .git is not the run's files). Such a glob protected nothing, silently, while a check that
// asks git about the tree (`git diff --exit-code`, `git ls-files`) reads the .git/config, index
// and hooks the model can still change; so the API refuses it, saying why.
//
// Refused: a glob that names .git by name, as its first path segment after any leading `**/`
// (`.git`, `.git/**`, `.git/config`, `**/.git/**`). A wildcard that could also match .git (`*`,
// `.g*`, `*/test/**`) is accepted: it protects the other paths it matches, as it always did, and
// docs/verify.md says .git is never among them. One regular expression, for CEL and the operator.
export const GIT_DIRECTORY_GLOB = '^([*][*]/)*[.]git(/|$)';

const GIT_DIRECTORY = new RegExp(GIT_DIRECTORY_GLOB);

/** What `kubectl apply` and the operator say of a glob that names .git. */
export const GIT_GLOB_MESSAGE =
  'a protect glob may not name .git (.git, .git/**, **/.git/...): git keeps its own directory and the restore never touches it, so the glob would protect nothing, and no wildcard glob covers .git either (see docs/verify.md, protect)';

/** Whether the glob names .git (GIT_DIRECTORY_GLOB). */
export function namesGitDirectory(glob: string): boolean {
  return GIT_DIRECTORY.test(glob);
}
