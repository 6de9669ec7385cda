// The one error type tools throw: a stable code from the contract and a message written for
// the model (what went wrong and what to do next, never the file's contents).
import type { ToolErrorCode } from './contract/error-codes.ts';
import type { ToolResponse } from './contract/tool-results.ts';

export class ToolboxError extends Error {
  override readonly name = 'ToolboxError';
  readonly code: ToolErrorCode;

  constructor(code: ToolErrorCode, message: string) {
    super(message);
    this.code = code;
  }

  static isInstance(value: unknown): value is ToolboxError {
    return value instanceof ToolboxError;
  }
}

/** Maps a Node fs error to a contract error, keeping the model-facing message short. */
export function toolboxErrorFromFs(error: unknown, displayPath: string): ToolboxError {
  if (ToolboxError.isInstance(error)) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOENT':
    case 'ENOTDIR':
      return new ToolboxError('NOT_FOUND', `${displayPath} does not exist; check the path with list_files or glob`);
    case 'EISDIR':
      return new ToolboxError('IS_DIRECTORY', `${displayPath} is a directory; use list_files to see its files`);
    case 'EACCES':
    case 'EPERM':
      return new ToolboxError('IO_ERROR', `${displayPath} is not accessible (permission denied)`);
    default:
      return new ToolboxError('IO_ERROR', `${displayPath}: ${code ?? (error instanceof Error ? error.message : String(error))}`);
  }
}

/** Any failure as the tool error a response carries (an fs error mapped, a ToolboxError as it is). */
export function toolErrorResponse(error: unknown, displayPath: string): ToolResponse {
  const known = toolboxErrorFromFs(error, displayPath);
  return { ok: false, error: { code: known.code, message: known.message } };
}
