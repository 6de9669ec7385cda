// What the jobs count for /metrics: runs that ended (and how long they took), and tool calls.
import type { TokenUsage } from '../agent/usage-accounting.ts';
import { TOOL_NAMES, type CodingRun } from '../api/index.ts';
import type { AgentDependencies } from './agent-dependencies.ts';

/** Counts a run that just ended and how long it took. */
export function observeFinished(deps: Pick<AgentDependencies, 'metrics' | 'now'>, run: CodingRun, phase: string, reason: string): void {
  deps.metrics.runsFinished.inc({ phase, reason });
  const started = Date.parse(run.status?.startTime ?? '');
  if (!Number.isNaN(started)) deps.metrics.runDuration.observe({ phase }, (deps.now().getTime() - started) / 1000);
}

const KNOWN_TOOLS: ReadonlySet<string> = new Set(TOOL_NAMES);

/**
 * The `tool` label for a tool call's name: the model writes the name, and every distinct value
 * is a series Prometheus keeps, so a name that is none of the toolbox's tools is 'unknown'.
 */
export function toolLabel(name: string): string {
  return KNOWN_TOOLS.has(name) ? name : 'unknown';
}

/** Counts a finished tool call and its duration (the ToolCallObserver of tool-execution.ts). */
export function toolCallObserver(deps: Pick<AgentDependencies, 'metrics'>) {
  return (name: string, outcome: 'ok' | 'error', seconds: number): void => {
    const tool = toolLabel(name);
    deps.metrics.toolCalls.inc({ tool, outcome });
    deps.metrics.toolDuration.observe({ tool }, seconds);
  };
}

/**
 * Adds a model call's tokens to chamvi_tokens_total, by direction, as status.usage counts them;
 * the model's name as a bounded label value (observability/model-label.ts).
 */
export function countTokens(
  deps: Pick<AgentDependencies, 'metrics'>,
  labels: { namespace: string; provider: string; model: string },
  usage: TokenUsage,
): void {
  const counts = (
    [
      ['input', usage.inputTokens],
      ['output', usage.outputTokens],
      ['cache_read', usage.cacheReadTokens],
      ['reasoning', usage.reasoningTokens],
    ] as const
  ).filter(([, value]) => value > 0);
  // Only a name that is counted takes one of the label's values.
  if (counts.length === 0) return;
  const counted = { ...labels, model: deps.metrics.tokenModelLabels.valueFor(labels.model) };
  for (const [direction, value] of counts) deps.metrics.tokens.inc({ direction, ...counted }, value);
}
