// The operator's Prometheus metrics, on one injected registry (no module-level singleton).
// Counters and histograms are updated where things happen; gauges that describe the world
// (runs by phase, queue depth) are computed when /metrics is scraped.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { RunTiming } from '../api/index.ts';
import { answerWithin } from '../workers/answer-within.ts';
import { MODEL_LABEL_MAX_LENGTH, MODEL_LABEL_MAX_NAMES, ModelLabels, OTHER_MODEL_LABEL } from './model-label.ts';

/** How long a scrape waits for the queue's counts (Redis) before it answers without them. */
export const QUEUE_DEPTH_TIMEOUT_MS = 1_000;

export interface RunsByPhase {
  /** phase → reason → count, from the leader's cache (empty on a standby). */
  (): Array<{ phase: string; reason: string; count: number }>;
}

export class OperatorMetrics {
  readonly registry = new Registry();
  readonly reconcileDuration: Histogram<'outcome'>;
  readonly reconcileErrors: Counter;
  readonly runsFinished: Counter<'phase' | 'reason'>;
  readonly runDuration: Histogram<'phase'>;
  readonly steps: Counter<'provider'>;
  readonly toolCalls: Counter<'tool' | 'outcome'>;
  readonly toolDuration: Histogram<'tool'>;
  readonly tokens: Counter<'direction' | 'namespace' | 'provider' | 'model'>;
  /** The `model` values of `tokens`: a run author's names, bounded (model-label.ts). */
  readonly tokenModelLabels = new ModelLabels();
  readonly modelCallDuration: Histogram<'provider'>;
  readonly modelCallErrors: Counter<'provider' | 'reason'>;
  readonly execErrors: Counter<'kind'>;
  readonly cloneCache: Counter<'result'>;
  readonly runPhaseDuration: Histogram<'phase'>;
  readonly namespaceTokensToday: Gauge<'namespace'>;
  readonly orphanedRunStatesSwept: Counter;

  constructor(
    options: {
      runsByPhase?: RunsByPhase;
      queueDepth?: () => Promise<Record<string, number>>;
      /** How long a scrape waits for queueDepth before it leaves the gauge out. */
      queueDepthTimeoutMs?: number;
      defaultMetrics?: boolean;
    } = {},
  ) {
    const registers = [this.registry];
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'chamvi_operator_' });
    this.reconcileDuration = new Histogram({
      name: 'chamvi_reconcile_duration_seconds',
      help: 'Time to reconcile one run.',
      labelNames: ['outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: 'chamvi_reconcile_errors_total',
      help: 'Reconciles that failed and were retried with backoff.',
      registers,
    });
    this.runsFinished = new Counter({
      name: 'chamvi_runs_finished_total',
      help: 'Runs that reached a terminal phase, by phase and reason.',
      labelNames: ['phase', 'reason'],
      registers,
    });
    this.runDuration = new Histogram({
      name: 'chamvi_run_duration_seconds',
      help: 'Wall-clock time from the start of a run to its end.',
      labelNames: ['phase'],
      buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600],
      registers,
    });
    this.steps = new Counter({
      name: 'chamvi_steps_total',
      help: 'Agent steps (model calls with their tool calls) completed.',
      labelNames: ['provider'],
      registers,
    });
    this.toolCalls = new Counter({
      name: 'chamvi_tool_calls_total',
      help: 'Tool calls executed, by tool and outcome (ok, error, denied).',
      labelNames: ['tool', 'outcome'],
      registers,
    });
    this.toolDuration = new Histogram({
      name: 'chamvi_tool_call_duration_seconds',
      help: 'Tool call round trip through the sandbox.',
      labelNames: ['tool'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 120],
      registers,
    });
    this.tokens = new Counter({
      name: 'chamvi_tokens_total',
      help:
        "Tokens the providers reported, by direction (input, output, cache_read, reasoning) and the run's namespace; compaction calls included, as in status.usage. " +
        `model: the first ${MODEL_LABEL_MAX_NAMES} model names this process saw, cut to ${MODEL_LABEL_MAX_LENGTH} characters; later ones count as "${OTHER_MODEL_LABEL}".`,
      labelNames: ['direction', 'namespace', 'provider', 'model'],
      registers,
    });
    this.modelCallDuration = new Histogram({
      name: 'chamvi_model_call_duration_seconds',
      help: 'One model call, retries included.',
      labelNames: ['provider'],
      buckets: [0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers,
    });
    this.modelCallErrors = new Counter({
      name: 'chamvi_model_call_errors_total',
      help: 'Model calls that failed for good, by reason.',
      labelNames: ['provider', 'reason'],
      registers,
    });
    this.execErrors = new Counter({
      name: 'chamvi_exec_errors_total',
      help: 'Sandbox transport failures (exec, protocol), by kind.',
      labelNames: ['kind'],
      registers,
    });
    this.cloneCache = new Counter({
      name: 'chamvi_clone_cache_total',
      help: 'Prepares with the clone cache on: hit (the run started from a kept archive) or miss (it cloned).',
      labelNames: ['result'],
      registers,
    });
    this.runPhaseDuration = new Histogram({
      name: 'chamvi_run_phase_duration_seconds',
      help: 'How long each phase of a run took (status.timings): Queued, PodScheduled, PodReady, SandboxClaimed, Clone, Import, Setup, FirstModelCall, FirstToolCall, Finalize.',
      labelNames: ['phase'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    });
    this.namespaceTokensToday = new Gauge({
      name: 'chamvi_namespace_tokens_today',
      help: "Tokens a namespace's runs spent this UTC day, as its tally in Redis last read or written by this replica (chamvi.dev/tokens-per-day).",
      labelNames: ['namespace'],
      registers,
    });
    this.orphanedRunStatesSwept = new Counter({
      name: 'chamvi_orphaned_run_states_swept_total',
      help: "Runs the leader's sweep stopped because their state was in Redis with no run left (deleted while no operator watched them).",
      registers,
    });
    const runsByPhase = options.runsByPhase;
    new Gauge({
      name: 'chamvi_runs',
      help: 'Runs by phase and reason, as the leader sees them.',
      labelNames: ['phase', 'reason'],
      registers,
      collect() {
        this.reset();
        for (const { phase, reason, count } of runsByPhase?.() ?? []) this.set({ phase, reason }, count);
      },
    });
    const queueDepth = options.queueDepth;
    const queueDepthTimeoutMs = options.queueDepthTimeoutMs ?? QUEUE_DEPTH_TIMEOUT_MS;
    new Gauge({
      name: 'chamvi_queue_jobs',
      help: 'Agent jobs in the queue, by state.',
      labelNames: ['state'],
      registers,
      async collect() {
        this.reset();
        // Bounded: the count is a Redis call, which waits for as long as Redis is away, and
        // prom-client waits for every collector: every scrape hung, and the operator looked
        // down exactly when its other figures mattered.
        const counts = queueDepth ? await answerWithin(queueDepth(), queueDepthTimeoutMs, 'counting the queue').catch(() => ({})) : {};
        for (const [state, count] of Object.entries(counts)) this.set({ state }, Number(count));
      },
    });
  }

  /** Observes status.timings entries just written: each write adds a phase once, so each is counted once. */
  observePhases(entries: readonly RunTiming[]): void {
    for (const entry of entries) this.runPhaseDuration.observe({ phase: entry.phase }, entry.durationMs / 1000);
  }
}
