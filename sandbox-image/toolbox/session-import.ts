// A session import inside `serve` (contract/protocol.ts): the archive arrives in frames on the
// session's stdin and is unpacked while it arrives, with the `import` command's checks
// (workspace-import.ts, tar-import.ts). The request is answered twice under its id: at once
// with `receiving`, and with the import's result when it is done.
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import { FrameReader, type ImportRequestLine } from './contract/protocol.ts';
import type { ToolResponse } from './contract/tool-results.ts';
import type { ToolboxContext } from './toolbox-context.ts';
import { ToolboxError, toolErrorResponse } from './toolbox-error.ts';
import { writeResponse } from './response-writer.ts';
import { importWorkspace } from './workspace-import.ts';

export class SessionImport {
  /** Settles once the import's answer is written. */
  readonly answered: Promise<void>;
  private readonly frames = new FrameReader();
  private readonly archive = new PassThrough();
  private readonly done: Promise<ToolResponse>;
  private settled = false;

  constructor(context: ToolboxContext, request: ImportRequestLine, output: NodeJS.WritableStream) {
    // The import may stop reading early (a refused entry, the end-of-archive marker); the frames
    // after that are dropped, never an error.
    this.archive.on('error', () => undefined);
    const receiving = writeResponse(output, request.id, { ok: true, result: { receiving: true } });
    this.done = importWorkspace(context, this.archive, request.prune).then(
      (result): ToolResponse => ({ ok: true, result }),
      (error: unknown): ToolResponse => toolErrorResponse(error, 'the archive'),
    );
    void this.done.then(() => (this.settled = true));
    this.answered = Promise.all([receiving, this.done]).then(([, response]) => writeResponse(output, request.id, response));
  }

  /**
   * Takes the session's next bytes: the archive's frames. Returns what follows the last frame
   * (requests again), or undefined while the archive goes on. A malformed count line cannot be
   * followed: the import fails with it, and so does the session (ProtocolError from serve).
   */
  async push(chunk: Uint8Array): Promise<Uint8Array | undefined> {
    const reading = this.frames.push(chunk);
    for (const part of reading.body) await this.write(part);
    if (reading.kind === 'invalid') {
      const broken = new ToolboxError('INVALID_INPUT', `protocol: ${reading.message}`);
      this.archive.destroy(broken);
      throw broken;
    }
    if (reading.rest === undefined) return undefined;
    this.archive.end();
    return reading.rest;
  }

  /** The session's stdin ended before the last frame: the archive ends where it was cut. */
  end(): void {
    this.archive.end();
  }

  private async write(part: Uint8Array): Promise<void> {
    if (this.settled) return;
    if (!this.archive.write(part)) await Promise.race([once(this.archive, 'drain').catch(() => undefined), this.done]);
  }
}
