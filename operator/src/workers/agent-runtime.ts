// Assembles the agent side of a replica: Redis connections, the queue, the run-state
// store, the sandbox pool and the worker, and hands the controller its RunAgent port.
import type { KubeConfig } from '@kubernetes/client-node';
import { Queue } from 'bullmq';
import type { ParsedCodingRun } from '../api/index.ts';
import type { OperatorConfig } from '../config/operator-config.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import type { KubeGateway } from '../kube/kube-gateway.ts';
import type { RecentRuns } from '../kube/recent-runs.ts';
import type { OperatorMetrics } from '../observability/operator-metrics.ts';
import type { RunAgent } from '../reconcile/run-agent.ts';
import type { CallingPolicy, CallingPolicyDependencies } from '../providers/calling-policy.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import type { AgentLogger } from './agent-dependencies.ts';
import { AgentInspector } from './agent-inspector.ts';
import { AgentQueue } from './agent-queue.ts';
import { startAgentWorker } from './agent-worker.ts';
import { QUEUE_NAME, type AgentJobData, type AgentJobName } from './job-ids.ts';
import { endpointCheckedModelFactory } from './endpoint-checked-model-factory.ts';
import { createModelFactory } from './model-factory.ts';
import { RunScriptCache } from './run-script-cache.ts';
import { kubernetesRunResources, type RunResources } from './run-resources.ts';
import { RunJobIndex } from './run-job-index.ts';
import { RunStateStore } from './run-state.ts';
import { RunStateSeal } from './run-state-seal.ts';
import { connectRedis, redisKeyPrefix, redisTopology } from './redis-connection.ts';
import { NamespaceTokenTally } from './namespace-token-tally.ts';
import type { NamespacePolicyReader } from '../kube/namespace-policy-reader.ts';
import { RunStatusWriter } from './run-status-writer.ts';
import { kubernetesSandboxLostCheck } from './sandbox-lost-check.ts';
import { SandboxPool } from './sandbox-pool.ts';
import { CloneCache } from './clone-cache.ts';
import { keepRunDiff } from './keep-diff.ts';
import { runRefOf } from './run-ref.ts';
import { kubernetesTranscriptWriter, type TranscriptWriter } from './transcript-writer.ts';
import { TrailingWrites } from './trailing-record.ts';
import { redisLandedMarks } from './trailing-marks.ts';
import type { Launch } from './process-launcher.ts';
import { answerWithin } from './answer-within.ts';
import { RedisNotConnectedError } from './errors/redis-not-connected-error.ts';
import { redisProbe } from './redis-probe.ts';
import { cutRedisWaitWarning, JobsInHand, redisUnreachableStop, stopWorker } from './worker-stop.ts';

/** How long /readyz waits for Redis to answer PING before saying it is unreachable. */
const REDIS_READINESS_TIMEOUT_MS = 1_000;
/** How long a reconcile waits for Redis to start, resume or stop a run, or count a namespace's tokens (answer-within.ts). */
export const CONTROLLER_REDIS_TIMEOUT_MS = 10_000;
/** How long the leader's sweep waits for the listing of every run state (a SCAN of all of Redis, a thousand keys a call). */
const RUN_STATE_LISTING_TIMEOUT_MS = 120_000;

export interface AgentRuntimeOptions {
  config: OperatorConfig;
  kubeConfig: KubeConfig;
  kube: KubeGateway;
  events: EventRecorder;
  metrics: OperatorMetrics;
  logger: AgentLogger;
  sandboxFor(run: ParsedCodingRun): Sandbox;
  callingPolicy: CallingPolicy;
  callingPolicyDependencies: CallingPolicyDependencies;
  fetch?: typeof globalThis.fetch;
  /** Where Secrets, ConfigMaps and the diff live; default: the cluster of kubeConfig. Local mode passes its own. */
  resources?: RunResources;
  /** Issue #15.4: each namespace's settings (its annotations); absent, no namespace has a token budget. */
  namespacePolicies?: NamespacePolicyReader;
  /** Where the transcript goes; default: ConfigMaps in the cluster of kubeConfig. Local mode passes its own. */
  transcript?: TranscriptWriter;
  /** Runs the API server returned a moment ago, for the jobs' reads (kube/recent-runs.ts); absent, every read is a GET. */
  recentRuns?: Pick<RecentRuns, 'read' | 'readHeld'>;
  /** Starts the workers' git and tar (process-launcher.ts); absent, from this process. */
  launch?: Launch;
}

export interface AgentRuntime {
  runAgent: RunAgent;
  checkRedis(): Promise<string | undefined>;
  /** Tokens a namespace's runs spent on a UTC day (the tally the workers keep), for admission. */
  tokensOn(namespace: string, day: string): Promise<number>;
  /** Jobs by state, for the queue-depth gauge. */
  queueDepth(): Promise<Record<string, number>>;
  /** The run states in Redis, for the leader's sweep of those whose run is gone (controller/orphaned-state-sweep.ts). */
  runStates: Pick<RunStateStore, 'uids' | 'ownerOf'>;
  /**
   * Stops this replica's workers taking jobs, at once; resolves when the jobs they hold have
   * ended (their locks renewed until then). What a shutdown does first (shutdown-sequence.ts).
   */
  stopTakingJobs(): Promise<void>;
  /** Stops taking jobs, waits for those held, then closes the queue, the sandbox sessions and Redis. */
  close(): Promise<void>;
}

export function startAgentRuntime(options: AgentRuntimeOptions): AgentRuntime {
  const { config } = options;
  // BullMQ workers block on Redis and must never give up a command (maxRetriesPerRequest null).
  const topology = redisTopology(config);
  const prefix = redisKeyPrefix(config.redisPrefix, topology);
  const connect = () => connectRedis(topology, { maxRetriesPerRequest: null, lazyConnect: false });
  // Security #11.1: without a configured stateKey (run --local, a single dev process) the key
  // is this process's alone; replicas that share runs need the same key (the chart's Secret).
  const seal = config.stateKey ? new RunStateSeal(config.stateKey) : RunStateSeal.generated();
  const stateRedis = connect();
  const queueRedis = connect();
  const workerRedis = connect();
  for (const connection of [stateRedis, queueRedis, workerRedis]) {
    connection.on('error', (error) => options.logger.warn({ err: error.message }, 'redis connection error'));
  }
  const states = new RunStateStore(stateRedis, prefix, seal, { namespaceMaxStateBytes: config.namespaceMaxStateBytes });
  const tally = new NamespaceTokenTally(stateRedis, prefix);
  const queue = new Queue<AgentJobData, void, AgentJobName>(QUEUE_NAME, { connection: queueRedis, prefix });
  // Without a listener BullMQ prints each of the queue's errors (every reconnect while Redis is
  // down) as a bare stack on stderr, outside the log; the connection's own listener above says it.
  queue.on('error', (error) => options.logger.warn({ err: error.message }, 'agent queue error'));
  const sandboxes = new SandboxPool(options.sandboxFor);
  // A verify check that gets no answer reads its pod, to tell a lost node from a stopped toolbox
  // (sandbox-lost-check.ts). Local mode passes a kubeConfig with no cluster: its sandbox is a
  // process on this machine, in no pod, and a check it does not answer is the check's.
  const sandboxLost = options.kubeConfig.getCurrentCluster() ? kubernetesSandboxLostCheck(options.kubeConfig) : undefined;
  // The scripted model's scripts, kept between a run's steps and dropped when it ends (run-script-cache.ts).
  const scripts = new RunScriptCache();
  // The replica's kept clones (#17.3): off unless the admin sized it.
  const cloneCache = config.cloneCacheMaxBytes > 0 ? new CloneCache(config.cloneCacheMaxBytes) : undefined;
  const resources = options.resources ?? kubernetesRunResources(options.kubeConfig);
  const agentQueue = new AgentQueue(queue, states, sandboxes, seal, queueRedis, new RunJobIndex(queueRedis, prefix));
  const inspector = new AgentInspector(queue, states);
  // The controller's port: the queue starts, resumes and stops runs; the inspector reads them.
  const runAgent: RunAgent = {
    // Each is idempotent (run-agent.ts), so one that answers after its bound did no harm.
    start: (run, podName) => answerWithin(agentQueue.start(run, podName), CONTROLLER_REDIS_TIMEOUT_MS, 'starting the agent'),
    resume: (run, answer) => answerWithin(agentQueue.resume(run, answer), CONTROLLER_REDIS_TIMEOUT_MS, 'resuming the agent'),
    answerQueued: (run, answer) =>
      answerWithin(agentQueue.answerQueued(run, answer), CONTROLLER_REDIS_TIMEOUT_MS, 'looking for the answer in the queue'),
    stop: (run) => answerWithin(agentQueue.stop(run), CONTROLLER_REDIS_TIMEOUT_MS, 'stopping the agent'),
    inspect: (run) => inspector.inspect(run),
    // A session of its own, closed after: the run's kept one may be in a job's use, or gone.
    // Against the commit the run cloned (its state's) while the state is there: a model that
    // committed its work keeps it, and the ended run can be continued (spec.continueFrom).
    keepDiff: async (run, { fromSandbox }) => {
      const sandbox = fromSandbox ? options.sandboxFor(run) : undefined;
      try {
        const state = await states.load(runRefOf(run)).catch(() => undefined);
        return await keepRunDiff({ resources, logger: options.logger }, run, sandbox, state);
      } finally {
        await sandbox?.close().catch(() => undefined);
      }
    },
  };
  const jobsInHand = new JobsInHand();
  // A running step's record trails its hand-over (trailing-record.ts).
  const trailing = new TrailingWrites(redisLandedMarks(stateRedis, prefix, seal));
  const worker = !config.workersEnabled
    ? undefined
    : startAgentWorker(
        {
          states,
          status: new RunStatusWriter(options.kube, undefined, options.recentRuns),
          resources,
          sandboxes,
          ...(sandboxLost ? { sandboxLost } : {}),
          queue: agentQueue,
          models: endpointCheckedModelFactory(
            createModelFactory(resources, options.callingPolicy, options.callingPolicyDependencies, options.fetch, scripts),
            config,
            options.namespacePolicies,
          ),
          events: options.events,
          transcript: options.transcript ?? kubernetesTranscriptWriter(options.kubeConfig),
          metrics: options.metrics,
          trailing,
          getRun: (namespace, name) =>
            options.recentRuns ? options.recentRuns.read(namespace, name) : options.kube.getRun(namespace, name),
          getRunFresh: (namespace, name) => options.kube.getRun(namespace, name),
          ...(options.recentRuns ? { getRunHeld: (namespace: string, name: string) => options.recentRuns!.readHeld(namespace, name) } : {}),
          scripts,
          launch: options.launch,
          clonePolicy: {
            allowRepo: config.allowRepo,
            maxCheckoutBytes: config.maxCheckoutBytes,
            maxCheckoutFiles: config.maxCheckoutFiles,
            maxGitMemoryBytes: config.maxGitMemoryBytes,
          },
          ...(cloneCache ? { cloneCache } : {}),
          setupTimeoutMs: config.setupTimeoutSeconds * 1000,
          maxApprovalWaitMs: config.maxApprovalWaitSeconds * 1000,
          publishPolicy: {
            author: config.publish.author,
            forges: config.publish.forges,
            ...(options.fetch ? { fetch: options.fetch } : {}),
          },
          ...(options.namespacePolicies
            ? { teamBudget: { policies: options.namespacePolicies, tally }, namespacePolicies: options.namespacePolicies }
            : {}),
          logger: options.logger,
          now: () => new Date(),
        },
        {
          connection: workerRedis,
          prefix,
          concurrency: config.workerConcurrency,
          lockDurationMs: config.jobLockSeconds * 1000,
          stalledIntervalMs: Math.max(1000, (config.jobLockSeconds * 1000) / 2),
          seal,
          jobsInHand,
        },
      );
  // /readyz and /metrics ask Redis for anyone who reaches the health port: nothing is sent
  // while a connection is not ready, and one question at a time (redis-probe.ts).
  const ping = redisProbe(stateRedis, () => stateRedis.ping());
  // Prepares wait as 'prioritized' (agent-queue.ts), not 'waiting'. The queue's client is queueRedis itself.
  const countJobs = redisProbe(queueRedis, () => queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed', 'completed'));
  // Said at start, not when the stop comes: a failover longer than the cut wait ends it early.
  const redisStop = redisUnreachableStop(topology.mode, config);
  const cutWait = worker ? cutRedisWaitWarning(redisStop, config) : undefined;
  if (cutWait) options.logger.warn(cutWait.fields, cutWait.message);
  // One stop, shared by stopTakingJobs and close (worker-stop.ts: it ends without Redis too).
  let stopped: Promise<void> | undefined;
  const stopWorkers = () =>
    (stopped ??= worker
      ? stopWorker(
          { close: () => worker.close(), jobs: jobsInHand, redisReady: () => workerRedis.status === 'ready' },
          { unreachableMs: redisStop.waitMs },
        )
      : Promise.resolve());
  return {
    runAgent,
    runStates: {
      uids: () => answerWithin(states.uids(), RUN_STATE_LISTING_TIMEOUT_MS, 'listing the run states'),
      ownerOf: (uid) => answerWithin(states.ownerOf(uid), CONTROLLER_REDIS_TIMEOUT_MS, 'reading a run state'),
    },
    tokensOn: (namespace, day) => answerWithin(tally.read(namespace, day), CONTROLLER_REDIS_TIMEOUT_MS, "reading the namespace's tokens"),
    async checkRedis() {
      // Bounded: a connected Redis that does not answer (hung, or a dropped connection not yet
      // noticed) would hold /readyz until it does, and answer 200 once it is back, instead of 503.
      try {
        await answerWithin(ping(), REDIS_READINESS_TIMEOUT_MS, 'PING');
        return undefined;
      } catch (error) {
        if (RedisNotConnectedError.isInstance(error)) return error.message;
        return `redis unreachable: ${(error as Error).message}`;
      }
    },
    // Not connected, it rejects at once: the scrape leaves the gauge out (operator-metrics.ts).
    queueDepth: countJobs,
    // BullMQ's close without force marks the worker closing before it awaits anything, so its
    // loop fetches no other job, and it returns only once the active ones have ended (or, with
    // Redis gone, once none is in hand: worker-stop.ts). close() after this waits on the same stop.
    stopTakingJobs: stopWorkers,
    async close() {
      await stopWorkers();
      await trailing.drain();
      await queue.close();
      await sandboxes.closeAll();
      await cloneCache?.clear();
      for (const connection of [stateRedis, queueRedis, workerRedis]) connection.disconnect();
    },
  };
}
