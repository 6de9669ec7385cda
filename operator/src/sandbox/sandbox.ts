// The Sandbox port: how a worker runs one tool request in a run's workspace. Implementations
// differ only in how they reach the toolbox (a local child process, a pod exec); all of them
// pass the same contract suite (test/support/sandbox-contract.ts).
import type { CleanShell } from '../../../sandbox-image/toolbox/contract/protocol.ts';
import type { ToolResponse } from '../../../sandbox-image/toolbox/contract/tool-results.ts';

export type { ToolResponse };

export interface ToolRequest {
  /** A tool name of the contract (TOOL_NAMES). */
  tool: string;
  input: unknown;
  /**
   * Names this very call across tries (the worker sends its step and tool call id): a
   * mutating call the toolbox finished under it is answered from its journal when sent again,
   * so a step redone after a worker died does not edit or run twice.
   */
  callId?: string;
  /** spec.verify.protect: the file tools refuse to change a path these globs cover (PROTECTED_PATH). */
  protect?: readonly string[];
  /**
   * bash only: a fresh shell without the model's saved session state. true: the verify check,
   * which first stops what the model left running; 'keep-jobs': the diff snapshot, which leaves
   * it running (protocol.ts's CleanShell says why the wire keeps `clean: true` for both).
   */
  clean?: boolean | CleanShell;
  /**
   * bash only: the operator's own command (prepare's import check, the diff take), run in the
   * toolbox's own environment, not the run's: no workspace directory on PATH, no HOME, no GIT_*
   * (protocol.ts's RequestLine). Never set for the model's calls, which carry its input only.
   */
  operatorEnvironment?: boolean;
}

export interface ImportOptions {
  /** Globs whose workspace paths are removed before the tar is unpacked (restoring spec.verify.protect). */
  prune?: readonly string[];
  /** Client-side deadline; past it the import fails with SandboxError('TIMEOUT'). Default: the sandbox's call timeout. */
  timeoutMs?: number;
}

export interface CallOptions {
  /** Abandons the call with a SandboxError('ABORTED'). */
  signal?: AbortSignal;
  /** Client-side deadline; past it the call fails with SandboxError('TIMEOUT'). */
  timeoutMs?: number;
}

export interface Sandbox {
  /**
   * Runs one tool. A tool failure (bad path, no match...) is a value: { ok: false, error }.
   * Only a broken transport or protocol throws, as a SandboxError.
   */
  call(request: ToolRequest, options?: CallOptions): Promise<ToolResponse>;
  /** Makes a tar stream (optionally gzip) the workspace; throws SandboxError when refused. */
  importTree(tar: AsyncIterable<Uint8Array> | NodeJS.ReadableStream, options?: ImportOptions): Promise<void>;
  /** Ends sessions and in-flight calls; later calls fail with SandboxError('CLOSED'). */
  close(): Promise<void>;
  /**
   * Opens the kept session now (a sandbox that keeps one), so the first call does not wait
   * for its start; the prepare job does it while the clone runs. Optional: without it the
   * first call opens the session.
   */
  open?(): Promise<void>;
}
