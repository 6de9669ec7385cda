// Repository instructions: the AGENTS.md and CLAUDE.md guidance that applies to a path,
// collected root-first (for each directory from the root down to the path's own: AGENTS.md,
// then CLAUDE.md), with standalone `@relative/path` lines outside code fences included
// depth-first. Every source is whole or left out, within per-file and total budgets; what is
// left out is reported in `diagnostics` with `complete: false`. Symlinks, special files, .git
// paths and escapes are never followed (best effort: not race-free).
import { createHash } from 'node:crypto';
import { lstat } from 'node:fs/promises';
import { openToRead, readUpTo } from './bounded-read.ts';
import path from 'node:path';
import type { InstructionSource, RepositoryInstructions } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import {
  INSTRUCTIONS_MAX_DIAGNOSTICS,
  INSTRUCTIONS_MAX_INCLUDE_DEPTH,
  INSTRUCTIONS_MAX_SOURCES,
  INSTRUCTIONS_SOURCE_MAX_BYTES,
  INSTRUCTIONS_TOTAL_MAX_BYTES,
} from './contract/limits.ts';
import { guardWorkspacePath, isDeniedPath } from './path-guard.ts';
import type { ToolboxContext } from './toolbox-context.ts';

export const INSTRUCTION_FILE_NAMES = ['AGENTS.md', 'CLAUDE.md'] as const;

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

export async function readRepositoryInstructions(
  context: ToolboxContext,
  input: ToolInput<'read_repository_instructions'>,
): Promise<RepositoryInstructions> {
  const relatives: string[] = [];
  for (const inputPath of input.paths) {
    relatives.push((await guardWorkspacePath(context, inputPath, { allowDenied: true })).relative);
  }
  return collectRepositoryInstructions(context, relatives, { pathsAreDirectoriesWhenTheyExist: true });
}

export interface CollectOptions {
  /** read_repository_instructions may name a directory; read_file always names a file. */
  pathsAreDirectoriesWhenTheyExist?: boolean;
}

/** Guidance for root-relative (already guarded) paths, which need not exist. */
export async function collectRepositoryInstructions(
  context: ToolboxContext,
  relatives: string[],
  options: CollectOptions = {},
): Promise<RepositoryInstructions> {
  const collector = new InstructionCollector(context.realRoot);
  const directories: string[] = [];
  for (const relative of relatives) {
    let own = path.posix.dirname(relative);
    if (options.pathsAreDirectoriesWhenTheyExist) {
      const stats = await lstat(path.join(context.realRoot, relative)).catch(() => undefined);
      if (stats?.isDirectory()) own = relative;
    }
    for (const directory of ancestorsRootFirst(own === '.' ? '' : own)) {
      if (!directories.includes(directory)) directories.push(directory);
    }
  }
  const blocked = new Set<string>();
  for (const directory of directories) {
    const parent = directory === '' ? undefined : path.posix.dirname(directory) === '.' ? '' : path.posix.dirname(directory);
    if (parent !== undefined && blocked.has(parent)) {
      blocked.add(directory);
      continue;
    }
    if (!(await collector.directoryIsSafe(directory))) {
      blocked.add(directory);
      continue;
    }
    for (const name of INSTRUCTION_FILE_NAMES) {
      await collector.collect(directory === '' ? name : `${directory}/${name}`, undefined, [], 0);
    }
  }
  return collector.result();
}

/** '', 'a', 'a/b' for 'a/b'. */
export function ancestorsRootFirst(directory: string): string[] {
  const result = [''];
  if (directory === '') return result;
  const segments = directory.split('/');
  for (let index = 1; index <= segments.length; index += 1) result.push(segments.slice(0, index).join('/'));
  return result;
}

class InstructionCollector {
  private readonly sources: InstructionSource[] = [];
  /** Every path looked at, read or left out, so a path named many times is weighed once. */
  private readonly considered = new Set<string>();
  private readonly diagnostics: string[] = [];
  private omittedDiagnostics = 0;
  private complete = true;
  private totalBytes = 0;

  constructor(private readonly realRoot: string) {}

  async directoryIsSafe(directory: string): Promise<boolean> {
    if (directory === '') return true;
    if (directory.split('/').includes('.git')) return false;
    const stats = await lstat(path.join(this.realRoot, directory)).catch(() => undefined);
    if (!stats) return false; // Not created yet: nothing to read below it.
    if (stats.isSymbolicLink()) {
      this.skip(`${directory}/ is a symlink; guidance below it was not read`);
      return false;
    }
    return stats.isDirectory();
  }

  async collect(relative: string, includedBy: string | undefined, stack: string[], depth: number): Promise<void> {
    if (stack.includes(relative) || relative === includedBy) {
      this.skip(`${relative}: include cycle from ${includedBy}`);
      return;
    }
    if (this.considered.has(relative)) return;
    this.considered.add(relative);
    if (relative.split('/').includes('.git')) {
      this.skip(`${relative}: paths under .git are not read`);
      return;
    }
    if (isDeniedPath(relative)) {
      this.skip(`${relative}: credential-looking files are not read`);
      return;
    }
    const { kind, size } = await this.kindOf(relative);
    if (kind === 'missing') {
      if (includedBy) this.skip(`${relative} (included by ${includedBy}) does not exist`);
      return;
    }
    if (kind !== 'file') {
      this.skip(`${relative}: ${kind === 'symlink' ? 'a symlink' : 'not a regular file'}, not followed`);
      return;
    }
    if (this.sources.length >= INSTRUCTIONS_MAX_SOURCES) {
      this.skip(`${relative}: more than ${INSTRUCTIONS_MAX_SOURCES} instruction sources`);
      return;
    }
    // The size from lstat decides before anything is read, so a huge file costs one stat.
    if (size > INSTRUCTIONS_SOURCE_MAX_BYTES) {
      this.skipOversize(relative, size);
      return;
    }
    if (this.totalBytes + size > INSTRUCTIONS_TOTAL_MAX_BYTES) {
      this.skipOverTotal(relative);
      return;
    }
    let bytes: Buffer;
    try {
      bytes = await readAtMost(path.join(this.realRoot, relative), INSTRUCTIONS_SOURCE_MAX_BYTES + 1);
    } catch {
      this.skip(`${relative}: could not be read`);
      return;
    }
    // The file may have grown or been swapped since the lstat: check what was read again.
    if (bytes.length > INSTRUCTIONS_SOURCE_MAX_BYTES) {
      this.skipOversize(relative, bytes.length);
      return;
    }
    if (this.totalBytes + bytes.length > INSTRUCTIONS_TOTAL_MAX_BYTES) {
      this.skipOverTotal(relative);
      return;
    }
    let content: string;
    try {
      content = strictUtf8
        .decode(bytes)
        .replace(/^\uFEFF/, '')
        .replaceAll('\r\n', '\n');
    } catch {
      this.skip(`${relative}: not UTF-8 text`);
      return;
    }
    this.totalBytes += bytes.length;
    const source: InstructionSource = { path: relative, sha256: createHash('sha256').update(bytes).digest('hex'), content };
    if (includedBy) source.includedBy = includedBy;
    this.sources.push(source);

    for (const include of includeLines(content)) {
      const target = resolveInclude(relative, include);
      if (target === undefined) {
        this.skip(`@${include.slice(0, 200)} in ${relative}: outside the workspace, not followed`);
      } else if (depth + 1 > INSTRUCTIONS_MAX_INCLUDE_DEPTH) {
        this.skip(`${target}: includes nested deeper than ${INSTRUCTIONS_MAX_INCLUDE_DEPTH}`);
      } else {
        await this.collect(target, relative, [...stack, relative], depth + 1);
      }
    }
  }

  result(): RepositoryInstructions {
    const diagnostics = [...this.diagnostics];
    if (this.omittedDiagnostics > 0) diagnostics.push(`and ${this.omittedDiagnostics} more left out`);
    return { sources: this.sources, complete: this.complete, diagnostics };
  }

  /** Checks every segment with lstat, so a symlinked directory on the way is seen, not followed. */
  private async kindOf(relative: string): Promise<{ kind: 'file' | 'missing' | 'symlink' | 'special'; size: number }> {
    const segments = relative.split('/');
    for (let index = 1; index <= segments.length; index += 1) {
      const stats = await lstat(path.join(this.realRoot, ...segments.slice(0, index))).catch(() => undefined);
      if (!stats) return { kind: 'missing', size: 0 };
      if (stats.isSymbolicLink()) return { kind: 'symlink', size: 0 };
      if (index === segments.length) return { kind: stats.isFile() ? 'file' : 'special', size: stats.size };
      if (!stats.isDirectory()) return { kind: 'missing', size: 0 };
    }
    return { kind: 'missing', size: 0 };
  }

  private skipOversize(relative: string, size: number): void {
    this.skip(`${relative}: ${size} bytes is over the ${INSTRUCTIONS_SOURCE_MAX_BYTES}-byte limit per file; read it with read_file`);
  }

  private skipOverTotal(relative: string): void {
    this.skip(`${relative}: over the ${INSTRUCTIONS_TOTAL_MAX_BYTES}-byte total for instructions; read it with read_file`);
  }

  private skip(message: string): void {
    this.complete = false;
    if (this.diagnostics.length < INSTRUCTIONS_MAX_DIAGNOSTICS) this.diagnostics.push(message.slice(0, 400));
    else this.omittedDiagnostics += 1;
  }
}

/** Up to `max` bytes of a regular file; a FIFO or a symlink swapped in after the lstat neither blocks the read nor leads it elsewhere. */
async function readAtMost(absolute: string, max: number): Promise<Buffer> {
  const handle = await openToRead(absolute);
  try {
    if (!(await handle.stat()).isFile()) throw new Error('not a regular file');
    return await readUpTo(handle, max);
  } finally {
    await handle.close();
  }
}

/** Standalone `@path` lines outside ``` and ~~~ fences. */
export function includeLines(content: string): string[] {
  const includes: string[] = [];
  let fence: string | undefined;
  for (const line of content.split('\n')) {
    const fenceMatch = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fenceMatch) {
      const marker = fenceMatch[1] as string;
      if (fence === undefined) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const include = /^\s*@(\S+)\s*$/.exec(line);
    if (include) includes.push(include[1] as string);
  }
  return includes;
}

/** Root-relative target of an include written in `from`, or undefined when it leaves the root. */
export function resolveInclude(from: string, include: string): string | undefined {
  if (include.startsWith('/') || include.startsWith('~') || include.includes('\0')) return undefined;
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(from), include));
  if (target === '..' || target.startsWith('../') || target === '.') return undefined;
  return target;
}
