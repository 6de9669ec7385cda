// edit_file and multi_edit: exact-text replacement on the text the model read (no BOM, LF),
// written back with the file's own BOM and line endings. All edits of one call apply to an
// in-memory copy first, so a failing edit writes nothing; edits of one file are serialized.
import type { FileHandle } from 'node:fs/promises';
import type { EditFileResult, MultiEditResult } from './contract/tool-results.ts';
import type { ToolInput } from './contract/tool-schemas.ts';
import { READ_TEXT_MAX_BYTES } from './contract/limits.ts';
import { writeFileAtomic } from './atomic-write.ts';
import { openToRead, readUpTo } from './bounded-read.ts';
import { withFileLock } from './file-locks.ts';
import { guardWritablePath } from './path-guard.ts';
import { decodeText, encodeText } from './text-encoding.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError, toolboxErrorFromFs } from './toolbox-error.ts';

export interface TextEdit {
  oldString: string;
  newString: string;
  replaceAll?: boolean | undefined;
}

export async function editFile(context: ToolboxContext, input: ToolInput<'edit_file'>): Promise<EditFileResult> {
  const { path, replacements } = await editInPlace(context, input.path, [input]);
  return { path, replacements };
}

export async function multiEdit(context: ToolboxContext, input: ToolInput<'multi_edit'>): Promise<MultiEditResult> {
  const { path, replacements } = await editInPlace(context, input.path, input.edits);
  return { path, edits: input.edits.length, replacements };
}

async function editInPlace(context: ToolboxContext, inputPath: string, edits: TextEdit[]) {
  const target = await guardWritablePath(context, inputPath);
  const displayPath = target.relative || '.';
  return withFileLock(context.home, target.real, async () => {
    const bytes = await readEditable(target.real, displayPath);
    const decoded = decodeText(bytes, displayPath);
    const { text, replacements } = applyEdits(decoded.text, edits, displayPath);
    try {
      await writeFileAtomic(target.real, encodeText(text, decoded));
    } catch (error) {
      throw toolboxErrorFromFs(error, displayPath);
    }
    return { path: displayPath, replacements };
  });
}

/**
 * The whole content of a regular file to edit. Opened like read_file opens (openToRead): a
 * blocking open of a FIFO waits for a writer on one of libuv's four threads, and four such
 * edits left the session answering nothing, not even the close of its stdin. The checks are
 * on the opened handle, so a FIFO or symlink swapped in after a stat is caught too.
 */
async function readEditable(real: string, displayPath: string): Promise<Buffer> {
  let handle: FileHandle | undefined;
  try {
    handle = await openToRead(real);
    const stats = await handle.stat();
    if (stats.isDirectory()) throw new ToolboxError('IS_DIRECTORY', `${displayPath} is a directory; name a file`);
    if (!stats.isFile()) {
      throw new ToolboxError('IO_ERROR', `${displayPath} is not a regular file (a FIFO, socket or device); edit only files`);
    }
    if (stats.size > READ_TEXT_MAX_BYTES) {
      throw new ToolboxError('TOO_LARGE', `${displayPath} has ${stats.size} bytes; edit files up to 16 MiB, or use bash`);
    }
    // One byte past the size shows a file that grew after the stat: its edited copy would drop
    // the bytes past the read, so nothing is written.
    const bytes = await readUpTo(handle, stats.size + 1);
    if (bytes.length > stats.size) {
      throw new ToolboxError('IO_ERROR', `${displayPath} grew while it was read for the edit; edit it when nothing else writes it`);
    }
    return bytes;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENXIO') {
      // A socket, which open() refuses outright.
      throw new ToolboxError('IO_ERROR', `${displayPath} is not a regular file (a socket); edit only files`);
    }
    throw toolboxErrorFromFs(error, displayPath);
  } finally {
    await handle?.close();
  }
}

/** Applies edits in order to normalized text; throws a contract error on the first that fails. */
export function applyEdits(original: string, edits: TextEdit[], displayPath = 'the file'): { text: string; replacements: number } {
  let text = original;
  let replacements = 0;
  edits.forEach((edit, index) => {
    const which = edits.length > 1 ? `edit ${index + 1}: ` : '';
    if (edit.oldString === '') {
      throw new ToolboxError('INVALID_INPUT', `${which}oldString is empty; to create or replace a whole file use write_file`);
    }
    if (edit.oldString === edit.newString) {
      throw new ToolboxError('NO_CHANGE', `${which}oldString and newString are the same; nothing to change`);
    }
    const count = countOccurrences(text, edit.oldString);
    if (count === 0) {
      throw new ToolboxError(
        'NO_MATCH',
        `${which}oldString was not found in ${displayPath}; read the file again and copy the text exactly (whitespace included)`,
      );
    }
    if (count > 1 && !edit.replaceAll) {
      throw new ToolboxError(
        'NOT_UNIQUE',
        `${which}oldString occurs ${count} times in ${displayPath}; add surrounding lines to make it unique, or set replaceAll`,
      );
    }
    if (!edit.replaceAll && occursAgainOverlapping(text, edit.oldString)) {
      throw new ToolboxError(
        'NOT_UNIQUE',
        `${which}oldString occurs at more than one place in ${displayPath}, places that overlap (the text repeats); add lines before or after it to make it unique`,
      );
    }
    // split/join instead of replace(): newString must not be read as a replacement pattern ($&).
    text = edit.replaceAll ? text.split(edit.oldString).join(edit.newString) : replaceFirst(text, edit.oldString, edit.newString);
    replacements += edit.replaceAll ? count : 1;
  });
  if (text === original) throw new ToolboxError('NO_CHANGE', `The edits leave ${displayPath} unchanged`);
  return { text, replacements };
}

/** Non-overlapping occurrences, left to right: what replaceAll replaces. */
function countOccurrences(text: string, needle: string): number {
  let count = 0;
  for (let index = text.indexOf(needle); index !== -1; index = text.indexOf(needle, index + needle.length)) count += 1;
  return count;
}

/**
 * Whether the first occurrence is followed by another that starts inside it: in `x\nx\nx` the
 * text `x\nx` starts at lines 1 and 2, so an edit of "the" place would be a guess. Only a second
 * start is looked for; counting every overlapping one can cost (text × oldString) on text that
 * repeats.
 */
function occursAgainOverlapping(text: string, needle: string): boolean {
  const first = text.indexOf(needle);
  const second = text.indexOf(needle, first + 1);
  return second !== -1 && second < first + needle.length;
}

function replaceFirst(text: string, needle: string, replacement: string): string {
  const index = text.indexOf(needle);
  return text.slice(0, index) + replacement + text.slice(index + needle.length);
}
