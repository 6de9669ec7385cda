// The Sandbox over any ToolboxTransport, in one of two modes: `call` starts one toolbox
// process per request (simple, nothing kept), `serve` keeps one session and multiplexes
// requests over it (no process start per call), starting a new session when the old one died.
// In serve mode an archive goes through the session too, unless the toolbox is older than
// session imports: then through a `toolbox import` process of its own, as in call mode.
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';
import { RunFailure } from '../api/run-failure.ts';
import { BASH_MAX_TIMEOUT_MS } from '../../../sandbox-image/toolbox/contract/limits.ts';
import { isToolName } from '../../../sandbox-image/toolbox/contract/tool-schemas.ts';
import { callInNewProcess, importInNewProcess } from './one-shot-call.ts';
import type { CallOptions, ImportOptions, Sandbox, ToolRequest } from './sandbox.ts';
import { SandboxError } from './sandbox-error.ts';
import { ServeSession } from './serve-session.ts';
import type { ToolboxTransport } from './toolbox-transport.ts';

export type ToolboxSandboxMode = 'call' | 'serve';

export interface ToolboxSandboxOptions {
  mode: ToolboxSandboxMode;
  /** Longest answer accepted; the largest legitimate one is a 5 MiB image as base64. */
  maxResponseBytes?: number;
  /** Client deadline when the call gives none: past the longest bash timeout. */
  defaultTimeoutMs?: number;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1_048_576;
export const DEFAULT_CALL_TIMEOUT_MS = BASH_MAX_TIMEOUT_MS + 60_000;

export class ToolboxSandbox implements Sandbox {
  private session: Promise<ServeSession> | undefined;
  private closed = false;
  private readonly limits: { maxResponseBytes: number; defaultTimeoutMs: number };

  constructor(
    private readonly transport: ToolboxTransport,
    private readonly options: ToolboxSandboxOptions,
  ) {
    this.limits = {
      maxResponseBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      defaultTimeoutMs: options.defaultTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS,
    };
  }

  async call(request: ToolRequest, options: CallOptions = {}): Promise<ToolResponse> {
    if (this.closed) throw new SandboxError('CLOSED', 'the sandbox is closed');
    // The model only sees the contract's tools, so any other name is the caller's bug.
    if (!isToolName(request.tool)) throw new SandboxError('PROTOCOL', `unknown tool ${JSON.stringify(request.tool)}`);
    // Given up on already (the run's deadline passed before the call): nothing is sent, so it
    // did not run, and no process or session is started for it.
    const signal = options.signal;
    if (signal?.aborted) throw abortedUnsent(signal);
    if (this.options.mode === 'call') return callInNewProcess(this.transport, request, options, this.limits);
    // A new session may take up to the transport's connect timeout: the caller is not held past
    // its signal for it, and a call given up on meanwhile was never written (the session keeps
    // starting, for the calls after).
    const session = signal ? await untilAborted(this.liveSession(), signal) : await this.liveSession();
    return session.call(request, options);
  }

  async importTree(tar: AsyncIterable<Uint8Array> | NodeJS.ReadableStream, options: ImportOptions = {}): Promise<void> {
    if (this.closed) throw new SandboxError('CLOSED', 'the sandbox is closed');
    const prune = options.prune ?? [];
    if (this.options.mode === 'serve') {
      const answer = await (await this.liveSession()).importTree(tar, prune, { timeoutMs: options.timeoutMs });
      if (answer !== 'unsupported') return refusedImport(answer);
    }
    refusedImport(await importInNewProcess(this.transport, tar, this.limits, prune, options.timeoutMs));
  }

  /** Serve mode: starts the session the calls will use (a failed start is tried again by the next call). */
  async open(): Promise<void> {
    if (this.closed) throw new SandboxError('CLOSED', 'the sandbox is closed');
    if (this.options.mode === 'serve') await this.liveSession();
  }

  async close(): Promise<void> {
    this.closed = true;
    const session = this.session;
    this.session = undefined;
    if (session) await (await session.catch(() => undefined))?.close();
  }

  private async liveSession(): Promise<ServeSession> {
    const looked = this.session;
    const current = looked ? await looked.catch(() => undefined) : undefined;
    if (current?.alive) return current;
    // Calls that found the session dead together start one new session, not one each: another
    // caller may have started it while this one awaited. (Each had started its own, and all but
    // the last, never closed, kept an exec socket and a toolbox process until the pod went.)
    if (this.session !== looked && this.session !== undefined) return this.liveSession();
    this.session = this.transport.start(['serve']).then(
      (process) => new ServeSession(process, this.limits),
      (error: unknown) => {
        this.session = undefined;
        // A pod the transport refused for good (not what the operator asked for) ends the run as is.
        if (RunFailure.isInstance(error)) throw error;
        throw new SandboxError(
          'TRANSPORT',
          `could not start a toolbox session: ${error instanceof Error ? error.message : String(error)}`,
          { cause: error },
        );
      },
    );
    return this.session;
  }
}

/** A call given up on before its request went to any toolbox: it did not run. */
const abortedUnsent = (signal: AbortSignal) =>
  new SandboxError('ABORTED', 'the tool call was aborted before it was sent to the toolbox', { cause: signal.reason, written: false });

/** `work`, unless `signal` aborts first: then it rejects at once with abortedUnsent (work's own outcome is dropped). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortedUnsent(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** Throws the toolbox's refusal of an archive as a SandboxError('IMPORT_REFUSED'). */
function refusedImport(response: ToolResponse): void {
  if (response.ok) return;
  throw new SandboxError('IMPORT_REFUSED', `the toolbox refused the workspace archive: ${response.error.message}`, {
    toolErrorCode: response.error.code,
  });
}
