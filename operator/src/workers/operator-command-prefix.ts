// The start of every bash command the operator runs in the sandbox before any approval (the diff
// take, prepare's import check). The toolbox runs them in its own environment
// (operatorEnvironment, sandbox-image/toolbox/operator-shell-environment.ts): PATH only its
// trusted directories (none in the workspace), no HOME, no GIT_*. The commands drop the git
// environment again themselves, so that whatever else reaches them (a GIT_DIR or
// GIT_CONFIG_COUNT another repository or settings, HOME=/workspace a .gitconfig the model wrote)
// chooses nothing for their git.
//
// They do not set PATH. The toolbox already gives them one that holds no workspace directory, and
// a toolbox older than the operatorEnvironment field (one that would run them with the run's
// PATH, /workspace/.venv/bin first) cannot answer at all: the default toolboxCommand,
// /opt/chamvi/node, is absent from those images, and the run fails SandboxInvalid at its next
// exec (CHANGELOG, "Changed"). A hard-coded PATH=/usr/bin:/bin guarded nothing more, and broke
// `run --local`, where git lives elsewhere (Nix, Homebrew on Linux). Variables bash read at its
// own start (BASH_ENV, exported functions) are beyond a command's reach: only the toolbox's
// environment keeps those out.

/**
 * No HOME nor XDG_CONFIG_HOME (git reads its global config and ignore file there), no GIT_* at
 * all, and no system or global git config. `compgen -e` is a builtin: it lists the exported
 * names without running anything PATH could choose.
 */
export const OPERATOR_COMMAND_PREFIX =
  'unset HOME XDG_CONFIG_HOME; ' +
  'for V in $(compgen -e); do case $V in GIT_*) unset "$V";; esac; done; ' +
  'export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null';
