// The environment of the operator's own bash commands (prepare's import check, the diff take at
// every snapshot and at finalize): they run before any approval and whatever the run's policy
// gates, so nothing the workspace holds may choose what they run. The toolbox's environment is
// the run's (spec.sandbox.env): a PATH starting at /workspace/.venv/bin ran a committed git for
// them, and HOME=/workspace read a .gitconfig the model wrote, whose clean filter the take's
// `git add` ran. So they get what the toolbox's own git gets (helper-programs.ts's
// isolatedHelperGitEnvironment: PATH its trusted directories, HOME none, no GIT_* nor
// XDG_CONFIG_HOME, no system or global config), without the variables bash itself reads at start
// from the environment (BASH_ENV sources a file, an exported function replaces a command), and
// without giving back the variables the pod held from the toolbox (contract/held-environment.ts:
// LD_PRELOAD and the like are the model's commands' only). The verify check is not one of these:
// it runs the run's own command in the run's environment, on purpose.
import { safeDirectoryEnvironment } from './child-process.ts';
import { HELD_ENV_PREFIX } from './contract/held-environment.ts';
import { isolatedHelperGitEnvironment } from './helper-programs.ts';
import type { ToolboxContext } from './toolbox-context.ts';

/** Variables bash reads at start that run code or change how a command line is read. */
const SHELL_START_VARIABLES = ['BASH_ENV', 'ENV', 'SHELLOPTS', 'BASHOPTS', 'CDPATH', 'GLOBIGNORE'];

/** The operator's shell's environment, from the toolbox's own (`inherited`). Pure. */
export function operatorShellEnvironment(
  context: Pick<ToolboxContext, 'realRoot' | 'home'>,
  inherited: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const environment: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(isolatedHelperGitEnvironment(context, inherited))) {
    if (name.startsWith(HELD_ENV_PREFIX) || name.startsWith('BASH_FUNC_') || SHELL_START_VARIABLES.includes(name)) continue;
    environment[name] = value;
  }
  // safe.directory: the workspace may belong to another user than the toolbox (an image's own).
  return { ...environment, ...safeDirectoryEnvironment(context.realRoot, environment), CHAMVI_WORKSPACE: context.realRoot };
}
