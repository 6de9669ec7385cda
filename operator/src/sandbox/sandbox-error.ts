// A failure of the sandbox itself (transport, protocol, deadline), as opposed to a tool error,
// which is a value in ToolResponse. The operator reports it to the model as a SandboxError
// tool error and never fails the run for it.
export type SandboxErrorReason =
  | 'TRANSPORT' // the toolbox process could not start, or died
  | 'PROTOCOL' // the toolbox answered something that is not a response
  | 'TIMEOUT' // no answer before the client deadline
  | 'ABORTED' // the caller's AbortSignal fired
  | 'RESPONSE_TOO_LARGE' // an answer longer than maxResponseBytes
  | 'IMPORT_REFUSED' // the toolbox refused the tar stream (see toolErrorCode)
  | 'CLOSED'; // the sandbox was closed

export class SandboxError extends Error {
  override readonly name = 'SandboxError';
  readonly reason: SandboxErrorReason;
  /** For IMPORT_REFUSED: the toolbox's error code (e.g. OUTSIDE_WORKSPACE). */
  readonly toolErrorCode: string | undefined;

  constructor(reason: SandboxErrorReason, message: string, options: { cause?: unknown; toolErrorCode?: string } = {}) {
    super(message, { cause: options.cause });
    this.reason = reason;
    this.toolErrorCode = options.toolErrorCode;
  }

  static isInstance(value: unknown): value is SandboxError {
    return value instanceof SandboxError;
  }
}
