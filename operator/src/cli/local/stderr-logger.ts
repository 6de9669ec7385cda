// The logger the workers, the reconciler and the event recorder get in local mode. The
// operator's JSON log lines are for log pipelines; a person at a terminal needs only what
// went wrong: errors, and warnings that carry an error (a job retried, Redis unreachable,
// an Event not recorded). Routine lines are dropped, and so are warnings without an error,
// which repeat what an Event already printed (a run ended as Failed). The same text is not
// repeated within a few seconds (a Redis that is down fails every reconnect).
import type { AgentLogger } from '../../workers/agent-dependencies.ts';

const REPEAT_WINDOW_MS = 5_000;

interface Fields {
  err?: unknown;
  job?: unknown;
  attempt?: unknown;
  [field: string]: unknown;
}

export class StderrLogger implements AgentLogger {
  private readonly lastPrinted: Map<string, number>;
  /** Set while stopping: jobs cut short then fail on purpose, which is not news. */
  private readonly state: { silent: boolean };

  constructor(
    private readonly write: (line: string) => void,
    private readonly bindings: Fields = {},
    shared?: { lastPrinted: Map<string, number>; state: { silent: boolean } },
  ) {
    this.lastPrinted = shared?.lastPrinted ?? new Map();
    this.state = shared?.state ?? { silent: false };
  }

  /** Prints nothing more, in this logger and its children. */
  silence(): void {
    this.state.silent = true;
  }

  info(_fields: object, _message: string): void {}

  warn(fields: object, message: string): void {
    const all = { ...this.bindings, ...(fields as Fields) };
    if (all.err !== undefined) this.print('warning', all, message);
  }

  error(fields: object, message: string): void {
    this.print('error', { ...this.bindings, ...(fields as Fields) }, message);
  }

  child(bindings: object): StderrLogger {
    return new StderrLogger(
      this.write,
      { ...this.bindings, ...(bindings as Fields) },
      { lastPrinted: this.lastPrinted, state: this.state },
    );
  }

  private print(level: string, fields: Fields, message: string): void {
    const where =
      typeof fields.job === 'string'
        ? ` (${fields.job} job${typeof fields.attempt === 'number' ? `, attempt ${fields.attempt}` : ''})`
        : '';
    const line = `${level}: ${message}${where}${fields.err !== undefined ? `: ${String(fields.err)}` : ''}`;
    const now = Date.now();
    if (this.state.silent || now - (this.lastPrinted.get(line) ?? -Infinity) < REPEAT_WINDOW_MS) return;
    if (this.lastPrinted.size > 1000) this.lastPrinted.clear();
    this.lastPrinted.set(line, now);
    this.write(line);
  }
}
