// A run's agent jobs with their state in a real Redis and everything else in memory, for tests
// of a run that ends (a cancel's ending, a deletion) while one of its jobs runs: the model is a
// stand-in answering with the tool calls the test names, the sandbox a recorder of every call
// made to it, and the queue a list of what the job queued. The controller's stop is
// `stopDeletesState`, which the test does during the model call or a sandbox call.
import type { LanguageModelV4Content } from '@ai-sdk/provider';
import type { CoreV1Event } from '@kubernetes/client-node';
import type { Redis } from 'ioredis';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { TranscriptEntry } from '../../operator/src/record/transcript-entry.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import type { Sandbox, ToolRequest } from '../../operator/src/sandbox/sandbox.ts';
import type { AgentDependencies, RunRef } from '../../operator/src/workers/agent-dependencies.ts';
import { runAgentJob, type AgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { generatingModel } from './generating-model.ts';
import { runningCodingRun } from './running-coding-run.ts';

/** A tool call the model asks for. */
export interface AskedCall {
  readonly toolName: string;
  readonly input: unknown;
}

/** What a hook may reach while the job runs: the run's state, and the sandbox calls so far. */
export interface RunInFlight {
  readonly states: RunStateStore;
  readonly ref: RunRef;
  readonly sandboxCalls: readonly ToolRequest[];
}

export interface RunEndedHarnessOptions {
  /** Names the run's keys in Redis (a number is added per run). */
  readonly prefix: string;
  /** The stand-in model's name. */
  readonly model: string;
  /** Over the run's spec (task 'Say hi.', no approvals, 20 steps, 30m). */
  readonly spec?: Partial<CodingRun['spec']>;
  /** What the model asks for (called with ids c1, c2, … in order), and what is done while it answers. */
  readonly answer: (run: RunInFlight) => Promise<readonly AskedCall[]>;
  /** Done as the sandbox takes each call, once it is recorded. */
  readonly duringSandboxCall?: (request: ToolRequest, run: RunInFlight) => Promise<void>;
  /**
   * A replica that is not the leader, past the bound: it holds no copy of the run
   * (getRunHeld answers nothing) and reads it fresh from the API server.
   */
  readonly onReplicaHoldingNoCopy?: boolean;
  /** Over the job's dependencies built here. */
  readonly deps?: Partial<AgentDependencies>;
}

let runs = 0;

/** A Running run at step 0 (its state created in Redis) and its agent jobs. */
export async function runEndedHarness(redis: Redis, options: RunEndedHarnessOptions) {
  runs += 1;
  const ref = { uid: `uid-${runs}`, namespace: 'agents', name: `run-${runs}` };
  const prefix = `${options.prefix}-${runs}`;
  const run = runningCodingRun(ref, { budget: { maxSteps: 20, timeout: '30m' }, ...options.spec });
  // What the run's record shows: its Events and its transcript entries, as stored.
  const events: CoreV1Event[] = [];
  const transcript: TranscriptEntry[] = [];
  const gateway = new MemoryKubeGateway(run, { configMaps: new Map(), secrets: new Map() }, (event) => void events.push(event));
  const logger = { info() {}, warn() {}, error() {}, child: () => logger };
  const states = new RunStateStore(redis, prefix, RunStateSeal.generated());
  const sandboxCalls: ToolRequest[] = [];
  const inFlight: RunInFlight = { states, ref, sandboxCalls };
  const sandbox: Sandbox = {
    call: async (request) => {
      sandboxCalls.push(request);
      await options.duringSandboxCall?.(request, inFlight);
      return { ok: true, result: {} };
    },
    importTree: async () => {
      throw new Error('no import in a step');
    },
    close: async () => {},
  };
  const model = generatingModel(
    options.model,
    async () =>
      (await options.answer(inFlight)).map((call, index) => ({
        type: 'tool-call',
        toolCallId: `c${index + 1}`,
        toolName: call.toolName,
        input: JSON.stringify(call.input),
      })) as LanguageModelV4Content[],
  );
  const enqueued: string[] = [];
  let runReads = 0;
  const read = (namespace: string, name: string) => ((runReads += 1), gateway.getRun(namespace, name));
  const deps: AgentDependencies = {
    states,
    status: new RunStatusWriter(gateway),
    resources: memoryRunResources(gateway),
    sandboxes: new SandboxPool(() => sandbox, { sweepIntervalMs: 0 }),
    queue: {
      step: async (_ref, completed) => void enqueued.push(`step ${completed}`),
      finalize: async () => void enqueued.push('finalize'),
      publish: async () => void enqueued.push('publish'),
    },
    models: async () => model,
    events: new EventRecorder(gateway, 'test', logger),
    transcript: memoryTranscriptWriter(gateway, (entry) => void transcript.push(entry)),
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    getRun: read,
    ...(options.onReplicaHoldingNoCopy ? { getRunFresh: read, getRunHeld: () => undefined } : {}),
    clonePolicy: { allowRepo: [], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 10_000 },
    logger,
    now: () => new Date(),
    ...options.deps,
  };
  await states.create(startingState(ref, Date.now()));
  /** The job run once; 'done', or what it threw. */
  const job = (name: AgentJob['name'], data: Partial<AgentJob['data']>): Promise<unknown> =>
    runAgentJob(deps, { name, data: { ...ref, ...data }, attempt: 1, attempts: 10 }).then(
      () => 'done',
      (error: unknown) => error,
    );
  const step = (completed: number) => job('step', { step: completed });
  /** The run's entry in its namespace's state-bytes tally (1 when there is one). */
  const tallied = () => redis.hexists(`${prefix}:state-bytes:${ref.namespace}`, ref.uid);
  return { deps, ref, states, gateway, sandboxCalls, enqueued, events, transcript, job, step, tallied, runReads: () => runReads };
}

/** The controller's stop (agent-queue.ts stop): the run's state deleted while its job runs. */
export const stopDeletesState = (run: { states: RunStateStore; ref: RunRef }): Promise<void> => run.states.delete(run.ref);
