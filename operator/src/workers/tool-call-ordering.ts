// Which tool calls of one step must not overlap (tool-execution.ts runs the others at once):
// calls on one file, and all shell calls. A file is named the way the toolbox resolves it
// (sandbox-image/toolbox/path-guard.ts, lexicalRelative), so `a.ts`, `./a.ts`, `src/../a.ts`
// and `/workspace/a.ts` are one file: keyed by their spelling they ran at once, and an
// edit_file could reach the toolbox before the write_file the model made first. Pure.
import path from 'node:path';
import { WORKSPACE_ALIAS } from '../../../sandbox-image/toolbox/path-guard.ts';
import type { PendingToolCall } from './run-state.ts';

/**
 * The path as the toolbox names it, relative to the workspace root ('' for the root), or
 * undefined for one it refuses (outside the root, leaving it through `..`, a NUL). Only the
 * /workspace alias the tool schemas offer is taken as the root: the toolbox also takes the
 * pod's real root, which the worker does not know, and a call that uses it merely keeps a
 * chain of its own, as before. Symlinks are the toolbox's to resolve; the toolbox still locks
 * each real file (file-locks.ts), so two names of one file never interleave a write.
 */
export function workspaceRelativePath(input: string): string | undefined {
  if (input.includes('\0')) return undefined;
  let rest = input;
  if (path.posix.isAbsolute(input)) {
    if (input !== WORKSPACE_ALIAS && !input.startsWith(`${WORKSPACE_ALIAS}/`)) return undefined;
    rest = input.slice(WORKSPACE_ALIAS.length);
  }
  const normalized = path.posix.normalize(`./${rest.replace(/^\/+/, '')}`);
  if (normalized === '..' || normalized.startsWith('../')) return undefined;
  return normalized === '.' ? '' : normalized.replace(/\/+$/, '');
}

/** Calls with one key run one after the other, in the order the model gave them. */
export function orderingKey(call: PendingToolCall): string {
  const input = call.input as { path?: unknown } | null;
  if (call.toolName.startsWith('bash')) return 'shell';
  if (input && typeof input.path === 'string') {
    const relative = workspaceRelativePath(input.path);
    // A path the toolbox will refuse keeps a key of its own spelling, apart from every resolved one.
    return relative === undefined ? `unresolved:${input.path}` : `path:${relative}`;
  }
  return `call:${call.toolCallId}`;
}
