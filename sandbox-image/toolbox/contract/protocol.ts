// The toolbox's wire protocol (TOOLS.md "Program and protocol"), for both ends: the toolbox
// (call.ts, serve.ts) and the operator (operator/src/sandbox/serve-session.ts, one-shot-call.ts)
// frame, split and read lines with this module and nothing else. One JSON object per line in
// each direction; a request is {id?, tool, input, callId?}, a response {id?, ok, result | error} with
// the id written first, so a reader that refuses an oversized line can still tell from its
// first bytes which request it answers. The one exception is a session import (below), whose
// archive follows its request line as length-prefixed frames. Pure (no I/O); esbuild bundles
// it into toolbox.mjs like the rest of contract/, so the image needs no node_modules.
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
  /**
   * bash only, operator only: run in a fresh shell, without the session's saved state, and save
   * none. `true` (the verify check) first stops what the model left running (leftover-processes.ts);
   * 'keep-jobs' (the diff snapshot) leaves it running: background jobs outlive steps.
   */
  clean?: CleanShell;
  /**
   * bash only, operator only: the operator's own command (prepare's import check, the diff
   * take), started in the toolbox's own environment rather than the run's: PATH only its trusted
   * directories, no HOME, no GIT_* or XDG_CONFIG_HOME, no held variable given back, and no
   * session state (operator-shell-environment.ts). A toolbox older than it ignores the field
   * and runs the command as it always did.
   */
  operatorEnvironment?: true;
}

/**
 * How an operator's clean shell treats what the model left running. On the wire 'keep-jobs' is
 * `"clean":true,"keepJobs":true`, never a new value of `clean`: a toolbox older than keepJobs
 * (a pod from before an upgrade, a pinned sandbox image) refused a `clean` that is not a boolean
 * and ignores a field it does not know, so it still runs the snapshot, sweeping as it did, and
 * no toolbox runs the verify check without its sweep.
 */
export type CleanShell = true | 'keep-jobs';

/** Bounds of `protect` (the CRD's, spec.verify.protect). */
const PROTECT_MAX = 64;
const PROTECT_GLOB_MAX = 256;

export type RequestReading =
  { kind: 'request'; request: RequestLine } | { kind: 'import'; request: ImportRequestLine } | { kind: 'invalid'; message: string };
export type ResponseReading = { kind: 'response'; id: unknown; response: ToolResponse } | { kind: 'invalid'; message: string };

export function encodeRequest(request: {
  id?: number | string;
  tool: string;
  input: unknown;
  callId?: string | undefined;
  protect?: readonly string[] | undefined;
  clean?: boolean | CleanShell | undefined;
  operatorEnvironment?: boolean | undefined;
}): string {
  const { protect, clean, operatorEnvironment, ...rest } = request;
  // Absent rather than empty, so a run without spec.verify sends the lines it always sent.
  return `${JSON.stringify({
    ...rest,
    ...(protect && protect.length > 0 ? { protect } : {}),
    ...(clean ? { clean: true } : {}),
    ...(clean === 'keep-jobs' ? { keepJobs: true } : {}),
    ...(operatorEnvironment ? { operatorEnvironment: true } : {}),
  })}\n`;
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
  const { id, tool, input, callId, protect, clean, keepJobs, operatorEnvironment } = value as Record<string, unknown>;
  if ('import' in value) return decodeImportRequest(id, (value as { import: unknown }).import);
  if (!isToolName(tool)) return { kind: 'invalid', message: `unknown tool ${JSON.stringify(tool)?.slice(0, 100)}` };
  const request: RequestLine = { id, tool, input: input ?? {} };
  if (callId !== undefined) {
    if (typeof callId !== 'string' || callId === '' || callId.length > CALL_ID_MAX_CHARS)
      return { kind: 'invalid', message: `callId must be a string of 1 to ${CALL_ID_MAX_CHARS} characters` };
    request.callId = callId;
  }
  if (protect !== undefined) {
    if (!isGlobList(protect))
      return { kind: 'invalid', message: `protect must be at most ${PROTECT_MAX} globs of 1 to ${PROTECT_GLOB_MAX} characters` };
    request.protect = protect;
  }
  if (clean !== undefined) {
    if (typeof clean !== 'boolean') return { kind: 'invalid', message: 'clean must be a boolean' };
    if (clean) request.clean = true;
  }
  if (keepJobs !== undefined) {
    if (typeof keepJobs !== 'boolean') return { kind: 'invalid', message: 'keepJobs must be a boolean' };
    // Only a clean shell sweeps, so keepJobs means nothing without one.
    if (keepJobs && request.clean) request.clean = 'keep-jobs';
  }
  if (operatorEnvironment !== undefined) {
    if (typeof operatorEnvironment !== 'boolean') return { kind: 'invalid', message: 'operatorEnvironment must be a boolean' };
    if (operatorEnvironment) request.operatorEnvironment = true;
  }
  return { kind: 'request', request };
}

const isGlobList = (value: unknown): value is string[] =>
  Array.isArray(value) &&
  value.length <= PROTECT_MAX &&
  value.every((glob) => typeof glob === 'string' && glob !== '' && glob.length <= PROTECT_GLOB_MAX);

// A session import (`serve` only): a tar stream sent through the kept session instead of a
// `toolbox import` process of its own, which saves a run an exec and a toolbox start.
//
//   -> {"id":7,"import":{"prune":[...]}}        the request line
//   <- {"id":7,"ok":true,"result":{"receiving":true}}
//   -> 65536\n<65536 bytes> 812\n<812 bytes> 0\n  the archive in frames, a count of 0 last
//   <- {"id":7,"ok":true,"result":{...}}           the import's own answer (or its error)
//
// The sender waits for `receiving` before the first frame: a toolbox older than session
// imports answers the request line with INVALID_INPUT ("unknown tool"), and the sender then
// imports the old way, its archive not yet read. Lines sent after the last frame are requests
// again. The toolbox may answer before the last frame (an archive it refuses, or one whose
// end-of-archive marker came); it reads and drops the frames up to the last either way.

export interface ImportRequestLine {
  id: unknown;
  /** spec.verify.protect globs removed before the archive is unpacked (the restore before a check), as `import --prune`. */
  prune: string[];
}

/** The largest frame a sender writes and a reader accepts. */
export const IMPORT_FRAME_MAX_BYTES = 1_048_576;

/** The frame that ends a session import's archive. */
export const IMPORT_LAST_FRAME = '0\n';

export const encodeImportRequest = (id: number, prune: readonly string[]): string => `${JSON.stringify({ id, import: { prune } })}\n`;

/** The count line before a frame of `bytes` bytes (1 to IMPORT_FRAME_MAX_BYTES; 0 is the last frame). */
export const encodeFrameHeader = (bytes: number): string => `${bytes}\n`;

/** An older toolbox's answer to a session import's request line: it knows no such request. */
export const isImportUnknown = (response: ToolResponse): boolean =>
  !response.ok && response.error.code === 'INVALID_INPUT' && response.error.message.startsWith('protocol: unknown tool');

function decodeImportRequest(id: unknown, body: unknown): RequestReading {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { kind: 'invalid', message: 'import must be a JSON object' };
  const prune = (body as { prune?: unknown }).prune ?? [];
  if (!isGlobList(prune))
    return { kind: 'invalid', message: `import.prune must be at most ${PROTECT_MAX} globs of 1 to ${PROTECT_GLOB_MAX} characters` };
  return { kind: 'import', request: { id, prune } };
}

export type FrameReading =
  /** The archive's bytes in this chunk, in order; `rest` (set after the last frame) is what follows the archive. */
  | { kind: 'frames'; body: Uint8Array[]; rest?: Uint8Array }
  /** A count line that is not a count: the stream cannot be followed any further. */
  | { kind: 'invalid'; body: Uint8Array[]; message: string };

/** Reads a session import's frames from a byte stream, chunk by chunk, without copying the bytes. */
export class FrameReader {
  private count = '';
  private remaining = 0;

  push(chunk: Uint8Array): FrameReading {
    const body: Uint8Array[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.remaining > 0) {
        const end = Math.min(chunk.length, at + this.remaining);
        body.push(chunk.subarray(at, end));
        this.remaining -= end - at;
        at = end;
        continue;
      }
      const byte = chunk[at++] as number;
      if (byte !== 0x0a) {
        this.count += String.fromCharCode(byte);
        if (this.count.length > 8) return { kind: 'invalid', body, message: 'import frame count too long' };
        continue;
      }
      const count = /^\d+$/.test(this.count) ? Number(this.count) : NaN;
      this.count = '';
      if (!(count <= IMPORT_FRAME_MAX_BYTES))
        return { kind: 'invalid', body, message: `import frame count must be 0 to ${IMPORT_FRAME_MAX_BYTES}` };
      if (count === 0) return { kind: 'frames', body, rest: chunk.subarray(at) };
      this.remaining = count;
    }
    return { kind: 'frames', body };
  }
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
  /** 'stop': the bytes after this line are not lines (a session import's frames); push returns them. */
  line(line: string): void | 'stop';
  /** A line longer than the bound: its first OVERSIZED_PREFIX_BYTES; the rest is skipped up to the next newline. */
  oversized(prefix: string): void;
  /**
   * A blank line, which is skipped; a reader whose writer never writes one (the operator, of the
   * toolbox) may refuse it. 'stop' as for line().
   */
  blank?(): void | 'stop';
}

/**
 * An unfinished line's buffer that is no larger than this is kept for the next line; a larger
 * one (an answer of megabytes) goes, so a kept session does not hold its largest line forever.
 */
const REUSED_LINE_BUFFER_BYTES = 65_536;
const EMPTY = new Uint8Array(0);

/**
 * Splits a byte stream into lines with a bound: a line longer than maxLineBytes is never
 * assembled. Counts bytes, not characters, and decodes whole lines only, so a character
 * split across chunks arrives whole. Blank lines are skipped.
 *
 * An unfinished line is copied into one buffer of its own, grown by doubling, rather than kept
 * as views of the chunks it came in: the writer chooses the chunks (over pods/exec each write
 * in the sandbox is a message, hence a chunk), and a view costs about 100 bytes of heap
 * whatever its length, so a line sent a byte per message cost a hundred times its bytes (1.5 MB
 * of it filled a 160 MiB heap). Copied, a line costs at most twice its bytes, and no chunk it
 * came in stays alive for it. A line that is whole in one chunk is decoded from the chunk.
 */
export class LineSplitter {
  private pending: Buffer | undefined;
  private pendingBytes = 0;
  private skipping = false;
  /** Bumped by discard(): a push whose handler discarded the splitter reads no further. */
  private discards = 0;

  constructor(
    private readonly maxLineBytes: number,
    private readonly handlers: LineHandlers,
  ) {}

  /** True while the rest of an oversized line is being skipped. */
  get skippingLine(): boolean {
    return this.skipping;
  }

  /** True from a line's first byte to its newline: its bytes are kept, or, oversized, skipped. */
  get lineUnfinished(): boolean {
    return this.skipping || this.pendingBytes > 0;
  }

  /** The bytes the buffer of the unfinished line occupies (0 when none is kept): what waiting for its newline holds. */
  get unfinishedLineBytes(): number {
    return this.pendingBytes > 0 ? (this.pending as Buffer).length : 0;
  }

  /** Drops the unfinished line and its buffer: its reader stopped reading, and it will never be handed on. */
  discard(): void {
    this.pendingBytes = 0;
    this.pending = undefined;
    this.skipping = false;
    this.discards++;
  }

  /**
   * Splits a chunk; returns the bytes after a line whose handler said 'stop', unread. A handler
   * that discards the splitter ends the push: the rest of the chunk is dropped, none of it kept
   * (else a reader that gave up would go on holding, and past the bound overflow, a buffer).
   */
  push(chunk: Uint8Array): Uint8Array | undefined {
    const discards = this.discards;
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      const piece = chunk.subarray(start, end);
      if (!this.skipping && this.pendingBytes + piece.length > this.maxLineBytes) {
        const prefix = this.prefixWith(piece);
        this.reset();
        this.skipping = true;
        this.handlers.oversized(prefix);
        if (this.discards !== discards) return undefined;
      }
      if (newline === -1) {
        if (!this.skipping) this.keep(piece);
        return undefined;
      }
      const stop = !this.skipping && this.emit(piece) === 'stop';
      if (this.discards !== discards) return undefined;
      this.skipping = false;
      start = newline + 1;
      if (stop) return chunk.subarray(start);
    }
    return undefined;
  }

  /** The end of the stream: a last line without a newline still counts. */
  end(): void {
    if (!this.skipping) this.emit(EMPTY);
    this.skipping = false;
  }

  /** The line made of what is pending and `last`, its final piece, handed on. */
  private emit(last: Uint8Array): void | 'stop' {
    let bytes: Uint8Array = last;
    if (this.pendingBytes > 0) {
      this.keep(last);
      bytes = this.pending!.subarray(0, this.pendingBytes);
    }
    const line = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
    this.reset();
    return line.trim() !== '' ? this.handlers.line(line) : this.handlers.blank?.();
  }

  /** Copies a piece of an unfinished line to the line's buffer (the caller checked the bound). */
  private keep(piece: Uint8Array): void {
    if (piece.length === 0) return;
    const needed = this.pendingBytes + piece.length;
    if (!this.pending || this.pending.length < needed) {
      const grown = Buffer.allocUnsafe(Math.min(this.maxLineBytes, Math.max(needed, 2 * (this.pending?.length ?? 0), 1_024)));
      if (this.pending) grown.set(this.pending.subarray(0, this.pendingBytes));
      this.pending = grown;
    }
    this.pending.set(piece, this.pendingBytes);
    this.pendingBytes = needed;
  }

  /** The first OVERSIZED_PREFIX_BYTES of what is pending followed by `piece`, decoded. */
  private prefixWith(piece: Uint8Array): string {
    const head = this.pending ? this.pending.subarray(0, Math.min(this.pendingBytes, OVERSIZED_PREFIX_BYTES)) : EMPTY;
    return Buffer.concat([head, piece.subarray(0, OVERSIZED_PREFIX_BYTES - head.length)]).toString('utf8');
  }

  private reset(): void {
    this.pendingBytes = 0;
    if (this.pending && this.pending.length > REUSED_LINE_BUFFER_BYTES) this.pending = undefined;
  }
}
