// Splits toolbox stdout into response lines with a bound: a line longer than maxLineBytes is
// never assembled; the reader gets its first bytes (enough to find the id, which the toolbox
// writes first) and the rest is skipped up to the next newline.
import { isToolErrorCode } from '../../../sandbox-image/toolbox/contract/error-codes.ts';
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import { SandboxError } from './sandbox-error.ts';

const OVERSIZED_PREFIX_BYTES = 256;

export interface ResponseLineHandlers {
  line(line: string): void;
  oversized(prefix: string): void;
}

export class ResponseLineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private skipping = false;

  constructor(
    private readonly maxLineBytes: number,
    private readonly handlers: ResponseLineHandlers,
  ) {}

  push(chunk: Buffer): void {
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
      if (!this.skipping) {
        const line = Buffer.concat(this.pending).toString('utf8');
        this.reset();
        if (line.trim() !== '') this.handlers.line(line);
      }
      this.skipping = false;
      start = newline + 1;
    }
  }

  private reset(): void {
    this.pending = [];
    this.pendingBytes = 0;
  }
}

export interface ParsedResponse {
  id: unknown;
  response: ToolResponse;
}

/** Validates one response line; throws SandboxError('PROTOCOL') when it is not one. */
export function parseResponseLine(line: string): ParsedResponse {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new SandboxError('PROTOCOL', `toolbox answered a line that is not JSON: ${line.slice(0, 120)}`);
  }
  const record = value as { id?: unknown; ok?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } };
  if (record?.ok === true && 'result' in record) return { id: record.id, response: { ok: true, result: record.result } };
  if (record?.ok === false && isToolErrorCode(record.error?.code) && typeof record.error?.message === 'string') {
    return { id: record.id, response: { ok: false, error: { code: record.error.code, message: record.error.message } } };
  }
  throw new SandboxError('PROTOCOL', `toolbox answered an object that is not a response: ${line.slice(0, 120)}`);
}

/** The id at the start of a (possibly cut) response line. */
export function idFromPrefix(prefix: string): unknown {
  const match = /^\s*\{\s*"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)/.exec(prefix);
  if (!match) return undefined;
  try {
    return JSON.parse(match[1] as string);
  } catch {
    return undefined;
  }
}

export function encodeRequest(request: { id?: number; tool: string; input: unknown }): string {
  return `${JSON.stringify(request)}\n`;
}
