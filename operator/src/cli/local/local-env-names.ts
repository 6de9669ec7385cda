// The spec.sandbox.env names run --local refuses. In the pod only the model's commands see the
// run's variables that matter here, inside the sandbox; locally the toolbox itself (node, and
// every git it runs for list_files, grep, git_diff) is started with them, on the user's machine,
// as the user: the toolbox hands bash the environment it was started with and has no separate
// one for the model's commands. So a variable node, git, the dynamic loader or a shell reads at
// start (NODE_OPTIONS=--import=..., a PATH with "." finding a committed ./git, GIT_CONFIG_* or a
// HOME with a .gitconfig naming a filter, LD_PRELOAD) ran code before any approval, with bash
// gated. These are refused rather than dropped, so the run does not quietly differ from the
// one the user wrote. Pure.

/** Exact names and prefixes (ending in "_"), each with what reads it. */
const REFUSED: ReadonlyArray<readonly [pattern: string, readBy: string]> = [
  ['NODE_', 'node reads NODE_* when the toolbox starts (NODE_OPTIONS can load any code)'],
  ['LD_', 'the dynamic loader reads LD_* for every program the toolbox starts'],
  ['DYLD_', 'the dynamic loader reads DYLD_* for every program the toolbox starts'],
  ['GIT_', "the toolbox's own git reads GIT_* (config, hooks and programs to run)"],
  ['CHAMVI_', 'the toolbox reads CHAMVI_* for its own settings'],
  ['PATH', "the toolbox finds git and rg on it, from the repository's directory"],
  ['HOME', "the toolbox's git reads its config (~/.gitconfig) there"],
  ['XDG_CONFIG_HOME', "the toolbox's git reads its config ($XDG_CONFIG_HOME/git/config) there"],
  ['BASH_ENV', 'bash runs the file it names before every command'],
  ['SHELLOPTS', "bash turns on the options it lists at start (xtrace expands PS4, code included, in the operator's own bash calls)"],
  ['BASHOPTS', 'bash turns on the options it lists at start'],
  ['PS4', 'bash expands it, command substitutions included, before each command it traces'],
  ['ENV', 'sh runs the file it names'],
  ['OPENSSL_', 'node reads OPENSSL_* when it starts (a config can load a module)'],
  ['GCONV_PATH', "git's iconv loads modules from it (a .gitattributes working-tree-encoding reaches it)"],
  // On macOS /usr/bin/git is a stub (xcrun) that runs the git of the developer tools these name.
  ['DEVELOPER_DIR', "on macOS /usr/bin/git runs the git of the developer directory it names (the toolbox's own git, from any directory)"],
  ['SDKROOT', 'on macOS /usr/bin/git and the other developer-tool stubs pick their tools by the SDK it names'],
  ['TOOLCHAINS', 'on macOS /usr/bin/git and the other developer-tool stubs run the tools of the toolchain it names'],
];

/** Names a refused prefix covers that nothing the toolbox starts reads (node reads no NODE_ENV). */
const ALLOWED = new Set(['NODE_ENV']);

/** Why run --local refuses a spec.sandbox.env variable of this name, or undefined when it may be set. */
export function localEnvNameProblem(name: string): string | undefined {
  if (ALLOWED.has(name)) return undefined;
  const hit = REFUSED.find(([pattern]) => (pattern.endsWith('_') ? name.startsWith(pattern) : name === pattern));
  if (!hit) return undefined;
  return (
    `${name} cannot be set for run --local: ${hit[1]}, and locally the toolbox runs on this machine with the run's variables, ` +
    `before any approval. Set it in the command instead (spec.sandbox.setup, spec.verify.command or the task, such as \`${name}=... npm test\`), ` +
    `or run the CodingRun in a cluster, where only the sandbox pod sees it`
  );
}
