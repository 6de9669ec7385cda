// The toolbox's wire protocol (TOOLS.md "Program and protocol"), for both ends: the toolbox
// (call.ts, serve.ts) and the operator (operator/src/sandbox/serve-session.ts, one-shot-call.ts)
// frame, split and read lines with this module and nothing else. One JSON object per line in
// each direction; a request is {id?, tool, input, callId?}, a response {id?, ok, result | error} with
// the id written first, so a reader that refuses an oversized line can still tell from its
// first bytes which request it answers. Pure (no I/O); esbuild bundles it into toolbox.mjs
// like the rest of contract/, so the image needs no node_modules.
import { isToolErrorCode } from './error-codes.ts';
import { CALL_ID_MAX_CHARS } from './limits.ts';
import type { ToolResponse } from './tool-results.ts';
import { isToolName, type ToolName } from './tool-schemas.ts';

/** The toolbox's commands: one request (`call`), many by id (`serve`), a tar stream (`import`). */
export const TOOLBOX_COMMANDS = ['call', 'serve', 'import'] as const;
export type ToolboxCommand = (typeof TOOLBOX_COMMANDS)[number];

export const isToolboxCommand = (value: unknown): value is ToolboxCommand => (TOOLBOX_COMMANDS as readonly unknown[]).includes(value);

/** How much of an oversized line a reader keeps: enough for the id, which comes first. */
export const OVERSIZED_PREFIX_BYTES = 256;

/** How much of a bad line an error message quotes. */
const QUOTED_CHARS = 120;

export interface RequestLine {
  /** serve: a number or string the answer repeats; call: none. */
  id?: unknown;
  tool: ToolName;
  input: unknown;
  /**
   * The caller's name for this very call (the worker sends step and tool call id): a mutating
   * call finished under it is answered from the toolbox's journal when it comes again.
   */
  callId?: string;
  /**
   * spec.verify.protect globs (operator only: the model writes inputs, never request lines):
   * write_file, edit_file and multi_edit refuse a path they match with PROTECTED_PATH.
   */
  protect?: string[];
  /** bash only, operator only: run in a fresh shell, without the session's saved state, and save none. */
  clean?: boolean;
}

/** Bounds of `protect` (the CRD's, spec.verify.protect). */
const PROTECT_MAX = 64;
const PROTECT_GLOB_MAX = 256;

export type RequestReading = { kind: 'request'; request: RequestLine } | { kind: 'invalid'; message: string };
export type ResponseReading = { kind: 'response'; id: unknown; response: ToolResponse } | { kind: 'invalid'; message: string };

export function encodeRequest(request: {
  id?: number | string;
  tool: string;
  input: unknown;
  callId?: string | undefined;
  protect?: readonly string[] | undefined;
  clean?: boolean | undefined;
}): string {
  const { protect, clean, ...rest } = request;
  // Absent rather than empty, so a run without spec.verify sends the lines it always sent.
  return `${JSON.stringify({ ...rest, ...(protect && protect.length > 0 ? { protect } : {}), ...(clean ? { clean: true } : {}) })}\n`;
}

/** One request line: a JSON object naming a tool of the contract (its input is checked by the tool's schema later). */
export function decodeRequest(line: string): RequestReading {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { kind: 'invalid', message: 'request is not valid JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { kind: 'invalid', message: 'request must be a JSON object' };
  const { id, tool, input, callId, protect, clean } = value as Record<string, unknown>;
  if (!isToolName(tool)) return { kind: 'invalid', message: `unknown tool ${JSON.stringify(tool)?.slice(0, 100)}` };
  const request: RequestLine = { id, tool, input: input ?? {} };
  if (callId !== undefined) {
    if (typeof callId !== 'string' || callId === '' || callId.length > CALL_ID_MAX_CHARS)
      return { kind: 'invalid', message: `callId must be a string of 1 to ${CALL_ID_MAX_CHARS} characters` };
    request.callId = callId;
  }
  if (protect !== undefined) {
    const valid =
      Array.isArray(protect) &&
      protect.length <= PROTECT_MAX &&
      protect.every((glob) => typeof glob === 'string' && glob !== '' && glob.length <= PROTECT_GLOB_MAX);
    if (!valid) return { kind: 'invalid', message: `protect must be at most ${PROTECT_MAX} globs of 1 to ${PROTECT_GLOB_MAX} characters` };
    request.protect = protect as string[];
  }
  if (clean !== undefined) {
    if (typeof clean !== 'boolean') return { kind: 'invalid', message: 'clean must be a boolean' };
    if (clean) request.clean = true;
  }
  return { kind: 'request', request };
}

/** One response line, the id first (none for `call` and `import`, which answer one request). */
export function encodeResponse(id: unknown, response: ToolResponse): string {
  return `${JSON.stringify(id === undefined ? response : { id, ...response })}\n`;
}

/** One response line: a tool result or a tool error with a code of the contract. */
export function decodeResponse(line: string): ResponseReading {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { kind: 'invalid', message: `a line that is not JSON: ${line.slice(0, QUOTED_CHARS)}` };
  }
  const record = value as { id?: unknown; ok?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } } | null;
  if (record?.ok === true && 'result' in record) return { kind: 'response', id: record.id, response: { ok: true, result: record.result } };
  if (record?.ok === false && isToolErrorCode(record.error?.code) && typeof record.error?.message === 'string') {
    return { kind: 'response', id: record.id, response: { ok: false, error: { code: record.error.code, message: record.error.message } } };
  }
  return { kind: 'invalid', message: `an object that is not a response: ${line.slice(0, QUOTED_CHARS)}` };
}

/** The id at the start of a line that is cut or not JSON, when its first bytes show one; else undefined. */
export function idFromLinePrefix(prefix: string): unknown {
  const match = /^\s*\{\s*"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})/.exec(prefix);
  if (!match) return undefined;
  try {
    return JSON.parse(match[1] as string);
  } catch {
    return undefined;
  }
}

export interface LineHandlers {
  line(line: string): void;
  /** A line longer than the bound: its first OVERSIZED_PREFIX_BYTES; the rest is skipped up to the next newline. */
  oversized(prefix: string): void;
}

/**
 * Splits a byte stream into lines with a bound: a line longer than maxLineBytes is never
 * assembled. Counts bytes, not characters, and decodes whole lines only, so a character
 * split across chunks arrives whole. Blank lines are skipped.
 */
export class LineSplitter {
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  private skipping = false;

  constructor(
    private readonly maxLineBytes: number,
    private readonly handlers: LineHandlers,
  ) {}

  push(chunk: Uint8Array): void {
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      if (!this.skipping) {
        this.pending.push(chunk.subarray(start, end));
        this.pendingBytes += end - start;
        if (this.pendingBytes > this.maxLineBytes) {
          const prefix = Buffer.concat(this.pending).subarray(0, OVERSIZED_PREFIX_BYTES).toString('utf8');
          this.reset();
          this.skipping = true;
          this.handlers.oversized(prefix);
        }
      }
      if (newline === -1) return;
      if (!this.skipping) this.emit();
      this.skipping = false;
      start = newline + 1;
    }
  }

  /** The end of the stream: a last line without a newline still counts. */
  end(): void {
    if (!this.skipping) this.emit();
    this.skipping = false;
  }

  private emit(): void {
    const line = Buffer.concat(this.pending).toString('utf8');
    this.reset();
    if (line.trim() !== '') this.handlers.line(line);
  }

  private reset(): void {
    this.pending = [];
    this.pendingBytes = 0;
  }
}
