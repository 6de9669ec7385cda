// Confines every path a tool touches to the workspace root. The check is made on the REAL
// path (symlinks resolved at every segment), also for files that do not exist yet, so neither
// `..`, an absolute path, a prefix sibling (/workspace2) nor a symlink can lead a read or a
// write outside. Best effort against races: the workspace owner could swap a directory for a
// symlink between check and use, but inside the sandbox that owner is the agent itself.
import { lstat, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError } from './toolbox-error.ts';

/** The path the contract lets the model use for the root, whatever the real root is. */
export const WORKSPACE_ALIAS = '/workspace';

export interface GuardedPath {
  /** Root-relative path with '/' separators; '' is the root itself. */
  relative: string;
  /** Absolute real path to open. */
  real: string;
}

export interface GuardOptions {
  /** git_diff and list_files may name paths under .git or credential files. */
  allowDenied?: boolean;
}

const MAX_SYMLINK_HOPS = 40;

export async function guardWorkspacePath(context: ToolboxContext, input: string, options: GuardOptions = {}): Promise<GuardedPath> {
  const relative = lexicalRelative(context, input);
  if (!options.allowDenied) assertNotDenied(relative, input);
  const real = await resolveReal(path.join(context.realRoot, relative), 0);
  if (!isInside(context.realRoot, real)) {
    throw new ToolboxError('OUTSIDE_WORKSPACE', `${input} resolves outside the workspace (through a symlink); use a path inside it`);
  }
  const realRelative = toPosix(path.relative(context.realRoot, real));
  if (!options.allowDenied) assertNotDenied(realRelative, input);
  return { relative: realRelative === relative ? relative : realRelative, real };
}

/**
 * A path a file tool will change: guarded as above, then refused when spec.verify.protect
 * covers it. The real root-relative path is checked, the one the write lands on, so neither
 * /workspace/, `..` nor a symlink the model made with bash leads past the check.
 */
export async function guardWritablePath(context: ToolboxContext, input: string): Promise<GuardedPath> {
  const guarded = await guardWorkspacePath(context, input);
  if (context.isProtected?.(guarded.relative)) {
    throw new ToolboxError(
      'PROTECTED_PATH',
      `${guarded.relative} is protected by the run's spec.verify.protect: the operator's check grades the work with it as it was ` +
        'at the start, so edits to it are refused and put back. Change the code under test, not the check.',
    );
  }
  return guarded;
}

/** Turns the model's path into a normalized root-relative one, refusing what leaves the root. */
export function lexicalRelative(context: ToolboxContext, input: string): string {
  if (input.includes('\0')) throw new ToolboxError('INVALID_INPUT', 'A path must not contain a NUL character');
  let rest: string;
  if (path.posix.isAbsolute(input)) {
    const prefix = [WORKSPACE_ALIAS, context.root, context.realRoot].find(
      (candidate) => input === candidate || input.startsWith(`${candidate}/`),
    );
    if (prefix === undefined) {
      throw new ToolboxError(
        'OUTSIDE_WORKSPACE',
        `${input} is outside the workspace; use a path relative to the workspace root or starting with ${WORKSPACE_ALIAS}/`,
      );
    }
    rest = input.slice(prefix.length);
  } else {
    rest = input;
  }
  const normalized = path.posix.normalize(`./${rest.replace(/^\/+/, '')}`);
  if (normalized === '..' || normalized.startsWith('../')) {
    throw new ToolboxError('OUTSIDE_WORKSPACE', `${input} leaves the workspace through ..; use a path inside it`);
  }
  return normalized === '.' ? '' : normalized.replace(/\/+$/, '');
}

/** Real path of a possibly not-yet-existing path: the existing prefix resolved, the rest appended. */
export async function resolveReal(absolute: string, hops: number): Promise<string> {
  if (hops > MAX_SYMLINK_HOPS) throw new ToolboxError('IO_ERROR', 'Too many levels of symbolic links');
  try {
    return await realpath(absolute);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
  }
  const parent = path.dirname(absolute);
  if (parent === absolute) return absolute;
  const realParent = await resolveReal(parent, hops);
  const candidate = path.join(realParent, path.basename(absolute));
  try {
    const stats = await lstat(candidate);
    // A dangling symlink: follow its target by hand, since a write would create that target.
    if (stats.isSymbolicLink()) return resolveReal(path.resolve(realParent, await readlink(candidate)), hops + 1);
    return candidate;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return candidate;
    throw error;
  }
}

export function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(path.sep) ? root : `${root}${path.sep}`);
}

const DENIED_BASENAMES = [/^\.netrc$/, /\.pem$/, /\.key$/, /^id_(rsa|dsa|ecdsa|ed25519)/, /^\.env$/, /^\.env\.(?!example$|sample$)/];

/** .git internals and credential-looking files, by root-relative path. */
export function isDeniedPath(relative: string): boolean {
  const segments = relative.split('/');
  if (segments.includes('.git')) return true;
  const base = segments.at(-1) ?? '';
  return DENIED_BASENAMES.some((pattern) => pattern.test(base));
}

function assertNotDenied(relative: string, input: string): void {
  if (isDeniedPath(relative)) {
    throw new ToolboxError(
      'DENIED_PATH',
      `${input} is a .git internal or a credential file, which the file tools do not open; use git_diff or bash for repository state`,
    );
  }
}

export function toPosix(value: string): string {
  return path.sep === '/' ? value : value.split(path.sep).join('/');
}
