// What every agent job needs, injected: state, status, cluster reads, the sandbox, the
// queue, the model factory, events, a clock and a logger. Nothing here is a singleton.
// The operations on these that every job shares are beside it: live-run.ts, forget-run.ts,
// fail-run.ts, run-metrics.ts.
import type { NamespacePolicyReader } from '../kube/namespace-policy-reader.ts';
import type { LanguageModel } from 'ai';
import type { CodingRun, CodingRunSpec } from '../api/index.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import type { CloneCache } from './clone-cache.ts';
import type { ClonePolicy } from './git-clone.ts';
import type { Launch } from './process-launcher.ts';
import type { PublishPolicy } from './publish-job.ts';
import type { OperatorMetrics } from '../observability/operator-metrics.ts';
import type { JobEnqueuer } from './agent-queue.ts';
import type { RunRef } from './run-ref.ts';
import type { RunResources } from './run-resources.ts';
import type { RunScriptCache } from './run-script-cache.ts';
import type { RunStateStore } from './run-state.ts';
import type { RunStatusWriter } from './run-status-writer.ts';
import type { SandboxLostCheck } from './sandbox-lost-check.ts';
import type { HeldRunReader } from './live-run.ts';
import type { SandboxPool } from './sandbox-pool.ts';
import type { TranscriptWriter } from './transcript-writer.ts';
import type { TeamTokenBudget } from './team-token-budget.ts';
import type { TrailingWrites } from './trailing-record.ts';

export interface AgentLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
  /** A logger whose every line also carries `bindings` (pino's child). */
  child(bindings: object): AgentLogger;
}

/** Builds the model for one call: reads the key fresh from the run's namespace (the script once per run, by `runUid`). */
export type ModelFactory = (namespace: string, model: CodingRunSpec['model'], runUid?: string) => Promise<LanguageModel>;

export interface AgentDependencies {
  states: RunStateStore;
  status: RunStatusWriter;
  resources: RunResources;
  sandboxes: SandboxPool;
  /**
   * Why the run's sandbox pod is lost (gone, not Running, not Ready: its node NotReady), or
   * undefined when it stands; one read of the pod (sandbox-lost-check.ts). Asked only when the
   * verify check got no answer, to tell a toolbox stopped by code in the pod (a failed check)
   * from a lost sandbox (retried into SandboxLost). Absent (local mode), no sandbox is on a node.
   */
  sandboxLost?: SandboxLostCheck;
  /**
   * The run as this process holds it without a request (kube/recent-runs.ts readHeld: the
   * leader's cache or the copy last returned here), for the step's look for a cancel after the
   * model call, which must cost no GET (issue #17); absent, that look reads the run as getRun does.
   */
  getRunHeld?: HeldRunReader;
  queue: JobEnqueuer;
  models: ModelFactory;
  events: EventRecorder;
  /** The run record: one entry per step, answer and failure (record-step.ts). */
  transcript: TranscriptWriter;
  metrics: OperatorMetrics;
  /** This process's trailing step records (trailing-record.ts); absent, every step writes its record before it hands on. */
  trailing?: TrailingWrites;
  /** The run, possibly as the API server returned it a moment ago (kube/recent-runs.ts says when that is safe). */
  getRun(namespace: string, name: string): Promise<CodingRun | undefined>;
  /** The run read from the API server now; absent, getRun is. */
  getRunFresh?(namespace: string, name: string): Promise<CodingRun | undefined>;
  /** The scripted model's scripts the model factory keeps (run-script-cache.ts), dropped with the run; absent, none are kept. */
  scripts?: Pick<RunScriptCache, 'forget'>;
  /** Starts the workers' git and tar (process-launcher.ts); absent, they are spawned from this process. */
  launch?: Launch;
  /** allowRepo and the clone's size bounds, from the operator's config (security #11.2, #11.7). */
  clonePolicy: ClonePolicy;
  /** Archives of earlier clones by repository and commit (clone-cache.ts); absent, every run clones. */
  cloneCache?: CloneCache;
  /** Issue #15.4: namespaces' tokens per day and their tallies; absent, no namespace has a budget. */
  teamBudget?: TeamTokenBudget;
  /** Issue #15.4: namespaces' narrowed lists, checked again where a run uses its repository late (repository-allowed-now.ts). */
  namespacePolicies?: NamespacePolicyReader;
  /** How long spec.sandbox.setup may run before the run fails SetupFailed; default 30 minutes. */
  setupTimeoutMs?: number;
  /**
   * config.maxApprovalWaitSeconds in ms: the most a run's approval waits, summed, move its
   * deadline on (reconcile/approval-wait.ts), as the controller counts it; default a week.
   */
  maxApprovalWaitMs?: number;
  /** spec.publish: the commit author and which forge API each host speaks (operator config publish). */
  publishPolicy?: PublishPolicy;
  /**
   * The job's lease on its BullMQ lock (job-lease.ts): aborted once another worker may run the
   * same job. Its writes are fenced by it (lease-fenced-dependencies.ts) and its model calls
   * end with it. Absent (tests, a job run directly), nothing is fenced.
   */
  lease?: AbortSignal;
  logger: AgentLogger;
  now(): Date;
}

export type { RunRef };
