// The port between the controller and the agent workers. The controller decides when a run
// starts and stops; the workers (BullMQ) do the work. Both methods are idempotent: the
// controller may call them again after a crash or a conflict.
import type { CodingRun, ParsedCodingRun } from '../api/index.ts';

export interface RunAgent {
  /** Enqueue the run's first job (prepare). A second call for the same run does nothing. */
  start(run: ParsedCodingRun): Promise<void>;
  /** Remove the run's queued jobs and its state. Safe when there is nothing to remove. */
  stop(run: CodingRun): Promise<void>;
}

/** Until the workers are wired, runs stop at Running; tests of the controller use this. */
export const idleAgent: RunAgent = {
  async start() {},
  async stop() {},
};
