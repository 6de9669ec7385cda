// The environment every git the workers start begins from (the clone, the clone cache's look
// at a clone, a continuation's `git apply` and the reads around it, publishing through the
// clone's). git runs with the checkout of a repository as its working directory, so:
// - PATH holds only its absolute entries (absolute-path.ts): a relative one (`node_modules/.bin`,
//   `bin`, `.`) is searched from the checkout, where a repository may have committed its own
//   `git`, which then ran in `run --local` before any approval;
// - no HOME, no system or global config: the machine's and the user's settings (and a
//   $HOME/.config/git the clone could give) never reach git;
// - replace refs are ignored: objects are what their ids say;
// - git never asks on a terminal.
// Callers add what their git needs (a HOME for the askpass, GIT_DIR, the allowed protocol) on
// top; a new git call starts here, so it cannot miss one of these.
import { NO_HOME } from '../../../sandbox-image/toolbox/contract/no-home.ts';
import { absolutePath } from './absolute-path.ts';

/** The base environment of the workers' git, from the operator's own `env` (its PATH only). */
export function isolatedGitEnvironment(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return {
    PATH: absolutePath(env.PATH),
    HOME: NO_HOME,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_NO_REPLACE_OBJECTS: '1',
    GIT_TERMINAL_PROMPT: '0',
  };
}
