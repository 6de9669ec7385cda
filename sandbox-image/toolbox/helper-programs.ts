// Where the toolbox finds the programs its own tools run (git, rg, grep and xargs for list_files,
// glob, grep and git_diff; the bash it starts for the model), and the environment its own git
// runs in.
//
// The toolbox's PATH is the run's (spec.sandbox.env replaces the pod's default), and a project's
// usual PATH puts a directory of the workspace first (/workspace/.venv/bin, node_modules/.bin):
// a repository that committed an executable .venv/bin/git had it run by the first list_files,
// grep or git_diff, read tools that are usually not gated, so before any approval. So a helper
// is looked up only in PATH's absolute entries whose real directory lies outside the workspace
// and the toolbox's home, and the program found must lie outside them too (by real path, so
// that /proc/self/cwd/bin or a symlink into the workspace is dropped as well); it is then started
// by that absolute path, never by name, which the child's PATH would look up again. A relative
// entry is dropped: it is looked up from the helper's working directory, the workspace.
// Directories elsewhere stay, so a custom image's git in /opt/conda/bin and a developer's rg in
// ~/.cargo/bin (run --local) are still found: outside the workspace, only code already running
// in the sandbox (the run's setup, an approved bash) can write, and the image's are read-only.
// The model's bash keeps the run's PATH and HOME: what the model runs is the model's business.
import { accessSync, constants, realpathSync } from 'node:fs';
import path from 'node:path';
import { NO_HOME } from './contract/no-home.ts';
import type { ToolboxContext } from './toolbox-context.ts';

/** The programs the tools run; bash is the model's shell, the others the tools' own helpers. */
export type HelperName = 'git' | 'rg' | 'grep' | 'xargs' | 'bash';

type Places = Pick<ToolboxContext, 'realRoot' | 'home'>;

const found = new Map<string, string | undefined>();

/**
 * The absolute path of helper `name` on the trusted part of `searchPath` (see the header), or
 * undefined when there is none. Cached per process: what lies outside the workspace changes only
 * by code that runs in the sandbox already.
 */
export function findHelper(context: Places, name: HelperName, searchPath: string = process.env.PATH ?? ''): string | undefined {
  const key = [name, searchPath, context.realRoot, context.home].join('\0');
  if (found.has(key)) return found.get(key);
  let program: string | undefined;
  for (const directory of trustedDirectories(context, searchPath)) {
    const candidate = path.join(directory, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (isUntrusted(context, realpathSync(candidate))) continue;
      program = candidate;
      break;
    } catch {
      // Not here; keep looking.
    }
  }
  found.set(key, program);
  return program;
}

/** The entries of `searchPath` a helper may come from, by their real paths, in order. */
export function trustedDirectories(context: Places, searchPath: string): string[] {
  const directories: string[] = [];
  for (const entry of searchPath.split(path.delimiter)) {
    if (!path.isAbsolute(entry)) continue;
    let real: string;
    try {
      real = realpathSync(entry);
    } catch {
      continue;
    }
    if (!isUntrusted(context, real) && !directories.includes(real)) directories.push(real);
  }
  return directories;
}

function isUntrusted(context: Places, realPath: string): boolean {
  return [context.realRoot, context.home].some((place) => realPath === place || realPath.startsWith(`${place}${path.sep}`));
}

/**
 * The toolbox's own git reads no configuration but the repository's, and takes no setting from
 * the run's environment: every inherited GIT_* (GIT_DIR, GIT_EXEC_PATH, GIT_CONFIG_COUNT and
 * its entries, GIT_EXTERNAL_DIFF, ...) is dropped, no system or global config is read, HOME is
 * one that does not exist (HOME=/workspace read a committed .gitconfig, whose textconv or
 * filter git_diff ran), XDG_CONFIG_HOME is dropped (git reads its attributes and ignore files
 * there), and PATH is the trusted directories only, for whatever git itself starts. Callers add
 * their own GIT_* on top.
 */
export function isolatedHelperGitEnvironment(context: Places, inherited: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const environment: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(inherited)) {
    if (name.startsWith('GIT_') || name === 'HOME' || name === 'XDG_CONFIG_HOME') continue;
    environment[name] = value;
  }
  return {
    ...environment,
    PATH: trustedDirectories(context, inherited.PATH ?? '').join(path.delimiter),
    HOME: NO_HOME,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
  };
}
