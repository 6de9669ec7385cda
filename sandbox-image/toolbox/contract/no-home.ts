// The HOME a git runs with when it must read no user's settings: the toolbox's own git
// (helper-programs.ts) and the operator's workers' (operator/src/workers/isolated-git-environment.ts).
// A directory that does not exist, so no ~/.gitconfig, ~/.config/git/attributes or ignore file
// is read from it, and none can be written there for a later git to read. One value for both, so
// the two isolations cannot drift apart. Pure.

/** git's HOME when it needs none: a directory that does not exist. */
export const NO_HOME = '/nonexistent';
