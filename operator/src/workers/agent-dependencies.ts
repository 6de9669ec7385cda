// What every agent job needs, injected: state, status, cluster reads, the sandbox, the
// queue, the model factory, events, a clock and a logger. Nothing here is a singleton.
import type { LanguageModel } from 'ai';
import { REASONS, codingRunSpec, type CodingRun, type CodingRunSpec, type ParsedCodingRun } from '../api/index.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import type { ClonePolicy } from './git-clone.ts';
import type { OperatorMetrics } from '../observability/operator-metrics.ts';
import { finishStatus } from '../reconcile/finish-status.ts';
import type { JobEnqueuer } from './agent-queue.ts';
import type { RunRef } from './run-ref.ts';
import type { RunResources } from './run-resources.ts';
import type { RunStateStore } from './run-state.ts';
import type { RunStatusWriter } from './run-status-writer.ts';
import type { SandboxPool } from './sandbox-pool.ts';

export interface AgentLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
  /** A logger whose every line also carries `bindings` (pino's child). */
  child(bindings: object): AgentLogger;
}

/** Builds the model for one call: reads the key or the script fresh from the run's namespace. */
export type ModelFactory = (namespace: string, model: CodingRunSpec['model']) => Promise<LanguageModel>;

export interface AgentDependencies {
  states: RunStateStore;
  status: RunStatusWriter;
  resources: RunResources;
  sandboxes: SandboxPool;
  queue: JobEnqueuer;
  models: ModelFactory;
  events: EventRecorder;
  metrics: OperatorMetrics;
  getRun(namespace: string, name: string): Promise<CodingRun | undefined>;
  /** allowRepo and the clone's size bounds, from the operator's config (security #11.2, #11.7). */
  clonePolicy: ClonePolicy;
  /** How long spec.sandbox.setup may run before the run fails SetupFailed; default 30 minutes. */
  setupTimeoutMs?: number;
  logger: AgentLogger;
  now(): Date;
}

export type { RunRef };

/** The run as it is now, if it still exists, is the same run and is not finished. */
export async function liveRun(deps: AgentDependencies, ref: RunRef): Promise<ParsedCodingRun | undefined> {
  const run = await deps.getRun(ref.namespace, ref.name);
  if (!run || run.metadata.uid !== ref.uid || run.metadata.deletionTimestamp) return undefined;
  const phase = run.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed' || phase === 'Cancelled') return undefined;
  const spec = codingRunSpec.safeParse(run.spec);
  return spec.success ? { ...run, spec: spec.data } : undefined;
}

/** Forgets a run a job found ended or gone: its state in Redis and its sandbox connection. */
export async function forgetRun(deps: AgentDependencies, ref: RunRef): Promise<void> {
  await deps.states.delete(ref.uid);
  await deps.sandboxes.release(ref.uid);
}

/** Ends a run as Failed with a reason and a message, records the Event, drops its state. */
export async function failRun(deps: AgentDependencies, ref: RunRef, reason: string, message: string): Promise<void> {
  const now = deps.now();
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status, run) => finishStatus(status, 'Failed', reason, message, run.metadata.generation ?? 0, now));
  if (outcome.written) {
    await deps.events.record(outcome.run, { type: 'Warning', reason, message });
    observeFinished(deps, outcome.run, 'Failed', reason);
  }
  // deps.logger is the job's child logger: the run's namespace, name and uid are bound.
  deps.logger.warn({ reason }, message);
  await deps.states.delete(ref.uid);
  await deps.sandboxes.release(ref.uid);
}

/** Counts a run that just ended and how long it took. */
export function observeFinished(deps: AgentDependencies, run: CodingRun, phase: string, reason: string): void {
  deps.metrics.runsFinished.inc({ phase, reason });
  const started = Date.parse(run.status?.startTime ?? '');
  if (!Number.isNaN(started)) deps.metrics.runDuration.observe({ phase }, (deps.now().getTime() - started) / 1000);
}

/** Counts a finished tool call and its duration (the ToolCallObserver of tool-execution.ts). */
export function toolCallObserver(deps: AgentDependencies) {
  return (tool: string, outcome: 'ok' | 'error', seconds: number): void => {
    deps.metrics.toolCalls.inc({ tool, outcome });
    deps.metrics.toolDuration.observe({ tool }, seconds);
  };
}

export const STATE_LOST_MESSAGE =
  'The run\'s working state is gone from Redis (was Redis restarted without persistence?); create the run again. Enable AOF persistence to survive restarts.';

export { REASONS };
