// read_file: text windows that end on whole lines (so a continuation at endLine + 1 has no gap
// and no overlap), raw bytes as base64, images for the model to see, and bash output logs
// under the toolbox home.
import { realpath } from 'node:fs/promises';
import { openToRead, readUpTo } from './bounded-read.ts';
import path from 'node:path';
import type { ReadFileResult, ReadFileTextResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { READ_BASE64_MAX_BYTES, READ_IMAGE_MAX_BYTES, READ_MAX_CHARS, READ_MAX_LINES, READ_TEXT_MAX_BYTES } from './contract/limits.ts';
import { guardWorkspacePath, isInside } from './path-guard.ts';
import { collectRepositoryInstructions } from './repository-instructions.ts';
import { decodeText, detectImage } from './text-encoding.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError, toolboxErrorFromFs } from './toolbox-error.ts';

/** Directories under the toolbox home whose files read_file may open: the bash logs. */
export const HOME_LOG_DIRECTORIES = ['out', 'jobs'];

export async function readFile(context: ToolboxContext, input: ToolInput<'read_file'>): Promise<ReadFileResult> {
  const logPath = await guardLogPath(context, input.path);
  const target = logPath ?? (await guardWorkspacePath(context, input.path));
  const displayPath = logPath ? logPath.relative : target.relative || '.';
  const bytes = await readBounded(target.real, displayPath, input.encoding === 'base64' ? 'base64' : 'text');

  if (input.encoding === 'base64') {
    return { path: displayPath, encoding: 'base64', content: bytes.toString('base64'), bytes: bytes.length };
  }
  const mediaType = detectImage(bytes.subarray(0, 16));
  if (mediaType) {
    if (bytes.length > READ_IMAGE_MAX_BYTES) {
      throw new ToolboxError('TOO_LARGE', `${displayPath} is an image of ${bytes.length} bytes; images are shown up to 5 MiB`);
    }
    return { path: displayPath, type: 'image', mediaType, bytes: bytes.length, content: bytes.toString('base64') };
  }
  if (bytes.length > READ_TEXT_MAX_BYTES) {
    throw new ToolboxError(
      'TOO_LARGE',
      `${displayPath} has ${bytes.length} bytes; text files are read up to 16 MiB, use grep or bash (head, sed -n) on it`,
    );
  }
  const { text } = decodeText(bytes, displayPath);
  const window = textWindow(text, input.offset ?? 1, input.limit ?? READ_MAX_LINES, displayPath);
  const result: ReadFileTextResult = { path: displayPath, ...window };
  if (!logPath) result.instructions = await collectRepositoryInstructions(context, [target.relative]);
  return result;
}

export interface TextWindow {
  content: string;
  startLine: number;
  endLine: number;
  totalLines: number;
  truncated: boolean;
}

/** Cuts normalized text to at most `limit` lines and READ_MAX_CHARS characters, on whole lines. */
export function textWindow(text: string, offset: number, limit: number, displayPath = 'file'): TextWindow {
  const lines = text === '' ? [] : text.split('\n');
  if (text.endsWith('\n')) lines.pop();
  const totalLines = lines.length;
  if (totalLines === 0) return { content: '', startLine: 1, endLine: 0, totalLines, truncated: false };
  if (offset > totalLines) {
    throw new ToolboxError('INVALID_INPUT', `offset ${offset} is past the end of ${displayPath}, which has ${totalLines} lines`);
  }
  const maxLines = Math.min(limit, READ_MAX_LINES);
  const pieces: string[] = [];
  let chars = 0;
  let cut = false;
  for (let index = offset - 1; index < totalLines && pieces.length < maxLines; index += 1) {
    const line = lines[index] ?? '';
    const cost = line.length + (pieces.length > 0 ? 1 : 0);
    if (pieces.length === 0 && line.length > READ_MAX_CHARS) {
      // Only a single line longer than the whole budget is returned cut.
      pieces.push(line.slice(0, READ_MAX_CHARS));
      cut = true;
      break;
    }
    if (chars + cost > READ_MAX_CHARS) break;
    pieces.push(line);
    chars += cost;
  }
  const endLine = offset - 1 + pieces.length;
  return { content: pieces.join('\n'), startLine: offset, endLine, totalLines, truncated: cut || endLine < totalLines };
}

async function readBounded(real: string, displayPath: string, mode: 'base64' | 'text'): Promise<Buffer> {
  const max = mode === 'base64' ? READ_BASE64_MAX_BYTES : Math.max(READ_TEXT_MAX_BYTES, READ_IMAGE_MAX_BYTES);
  let handle;
  try {
    handle = await openToRead(real);
    const stats = await handle.stat();
    if (stats.isDirectory()) throw new ToolboxError('IS_DIRECTORY', `${displayPath} is a directory; use list_files to see its files`);
    if (!stats.isFile()) {
      throw new ToolboxError('IO_ERROR', `${displayPath} is not a regular file (a FIFO, socket or device); read_file opens only files`);
    }
    if (stats.size > max) {
      throw new ToolboxError(
        'TOO_LARGE',
        mode === 'base64'
          ? `${displayPath} has ${stats.size} bytes; base64 reads are limited to 1 MiB`
          : `${displayPath} has ${stats.size} bytes; text files are read up to 16 MiB, use grep or bash (head, sed -n) on it`,
      );
    }
    // Read at most max + 1 bytes even if the file grows meanwhile: the buffer stays bounded.
    const bytes = await readUpTo(handle, Math.min(stats.size, max) + 1);
    if (bytes.length > max) throw new ToolboxError('TOO_LARGE', `${displayPath} grew past the read limit while being read`);
    return bytes;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENXIO') {
      // A socket, which open() refuses outright.
      throw new ToolboxError('IO_ERROR', `${displayPath} is not a regular file (a socket); read_file opens only files`);
    }
    throw toolboxErrorFromFs(error, displayPath);
  } finally {
    await handle?.close();
  }
}

/** An absolute path into the home's log directories, or undefined for a workspace path. */
async function guardLogPath(context: ToolboxContext, input: string): Promise<{ relative: string; real: string } | undefined> {
  if (!path.isAbsolute(input) || !isInside(context.home, path.resolve(input))) return undefined;
  const inLogDirectory = (candidate: string) =>
    HOME_LOG_DIRECTORIES.some((directory) => {
      const logs = path.join(context.home, directory);
      return candidate !== logs && isInside(logs, candidate);
    });
  const refuse = () =>
    new ToolboxError('OUTSIDE_WORKSPACE', `${input} is outside the workspace; only bash output logs can be read from the toolbox home`);
  // Checked before and after resolving, so neither a name nor a symlink reaches other home files.
  if (!inLogDirectory(path.resolve(input))) throw refuse();
  let real: string;
  try {
    real = await realpath(input);
  } catch (error) {
    throw toolboxErrorFromFs(error, input);
  }
  if (!inLogDirectory(real)) throw refuse();
  return { relative: real, real };
}
