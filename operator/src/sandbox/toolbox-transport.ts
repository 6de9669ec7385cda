// How a Sandbox reaches the toolbox: start `toolbox.mjs <args>` somewhere and get its stdio.
// The local implementation spawns node; a pods/exec implementation opens an exec stream. The
// protocol (serve-session.ts, one-shot-call.ts) works on these streams alone.
import type { Readable, Writable } from 'node:stream';

export interface ToolboxProcess {
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** Resolves when the process ends (never rejects); code null when killed by a signal. */
  exited: Promise<{ code: number | null; signal: string | null }>;
  /** Ends the process soon, letting it stop its own commands first (SIGTERM then SIGKILL, or closing the exec stream). */
  kill(): void;
}

export interface ToolboxTransport {
  /** Starts the toolbox with these arguments, e.g. ['serve'] or ['call']; rejects when it cannot start. */
  start(args: string[]): Promise<ToolboxProcess>;
}
