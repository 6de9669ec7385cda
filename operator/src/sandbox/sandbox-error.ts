// A failure of the sandbox itself (transport, protocol, deadline), as opposed to a tool error,
// which is a value in ToolResponse. The operator reports it to the model as a SandboxError
// tool error and never fails the run for it; a job that meets it is retried, and only a job
// out of tries fails the run SandboxLost (workers/job-failure.ts). Not a RunFailure: its
// reason is a transport cause, not a status.reason.
export type SandboxErrorReason =
  | 'TRANSPORT' // the toolbox process could not start, or died
  | 'PROTOCOL' // the toolbox answered something that is not a response
  | 'TIMEOUT' // no answer before the client deadline
  | 'ABORTED' // the caller's AbortSignal fired
  | 'RESPONSE_TOO_LARGE' // an answer longer than maxResponseBytes
  | 'IMPORT_REFUSED' // the toolbox refused the tar stream (see toolErrorCode)
  | 'CLOSED'; // the sandbox was closed

const marker = Symbol.for('chamvi.error.SandboxError');

export class SandboxError extends Error {
  private readonly [marker] = true;
  override readonly name = 'SandboxError';
  readonly reason: SandboxErrorReason;
  /** For IMPORT_REFUSED: the toolbox's error code (e.g. OUTSIDE_WORKSPACE). */
  readonly toolErrorCode: string | undefined;
  /**
   * For ABORTED and TIMEOUT: false when the request was never written to the toolbox (given
   * up on before its turn, or before its session had started), so this call did not run;
   * undefined when it may have been (it may be running still).
   */
  readonly written: false | undefined;

  constructor(reason: SandboxErrorReason, message: string, options: { cause?: unknown; toolErrorCode?: string; written?: false } = {}) {
    super(message, { cause: options.cause });
    this.reason = reason;
    this.toolErrorCode = options.toolErrorCode;
    this.written = options.written;
  }

  /** Marker based (the vercel/ai pattern), like RunFailure: also true for a SandboxError of another copy of this module. */
  static isInstance(value: unknown): value is SandboxError {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[marker] === true;
  }
}
