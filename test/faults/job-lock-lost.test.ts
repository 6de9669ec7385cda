// A job whose worker is alive but whose BullMQ lock ran out while Redis did not answer (a
// Sentinel failover, a restart: here a SIGSTOPped redis-server) is taken by another worker's
// stalled check while the first still runs it. The first must stop before it writes anything
// more (job-lease.ts): a late save of its would undo the second's, and its next job would be
// queued twice. Two replicas' workers (startAgentWorker, as agent-runtime.ts starts them) share
// one real redis-server, the run's state and queue, and the workspace (a local sandbox); the
// model is a stand-in whose answers the test holds and releases.
//
//   A  takes step 1 and asks the model; the answer is held
//   Redis is frozen for twice the lock's life, then thawed
//   B  takes the same step (A's lock ran out) and asks the model; its answer is held
//   A's answer comes: A must not save, queue or write status or transcript
//   B's answer comes: B saves, queues finalize, and the run ends Succeeded with B's answer
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { Queue, type Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { createLocalSandbox, type LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import type { AgentDependencies, AgentLogger } from '../../operator/src/workers/agent-dependencies.ts';
import { AgentQueue, type JobEnqueuer } from '../../operator/src/workers/agent-queue.ts';
import { startAgentWorker } from '../../operator/src/workers/agent-worker.ts';
import { QUEUE_NAME, type AgentJobData, type AgentJobName } from '../../operator/src/workers/job-ids.ts';
import { RunJobIndex } from '../../operator/src/workers/run-job-index.ts';
import { RunStateStore, type RunState } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { PrivateRedis } from '../support/fault-injection.ts';
import { eventually } from '../support/operator-process.ts';
import { generatingModel } from '../support/generating-model.ts';
import { runningCodingRun } from '../support/running-coding-run.ts';

/** config.jobLockSeconds at its least (2), and the stalled check agent-runtime.ts derives from it. */
const LOCK_MS = 2_000;
const STALLED_MS = 1_000;
/** Longer than the lock's life: Redis gives it up, and another worker's stalled check takes the job. */
const FROZEN_MS = 2 * LOCK_MS;

type Replica = 'A' | 'B';

/** A model call held until the test releases it; it answers whatever the signal says, as a slow provider may. */
interface HeldCall {
  signal: AbortSignal | undefined;
  release(): void;
}

/** The run's state store of one replica, recording the saves that reach Redis. */
class RecordingStore extends RunStateStore {
  constructor(
    redis: Redis,
    prefix: string,
    seal: RunStateSeal,
    private readonly replica: Replica,
    private readonly writes: string[],
  ) {
    super(redis, prefix, seal);
  }

  override async save(state: RunState): Promise<void> {
    this.writes.push(`${this.replica} save ${state.stage} ${state.step}`);
    await super.save(state);
  }
}

function answerModel(replica: Replica, calls: Map<Replica, HeldCall>): LanguageModelV4 {
  return generatingModel('held', async (options) => {
    await new Promise<void>((release) => calls.set(replica, { signal: options.abortSignal, release }));
    return [{ type: 'text', text: `the answer ${replica} got` }];
  });
}

const quiet: AgentLogger = {
  info() {},
  warn() {},
  error() {},
  child: () => quiet,
};

describe('a job whose lock ran out while Redis was frozen, taken over by another worker', () => {
  const scratch = mkdtempSync(path.join(tmpdir(), 'chamvi-lock-lost-'));
  const ref = { uid: 'uid-lock-lost', namespace: 'agents', name: 'lock-lost' };
  const prefix = 'faults-lock-lost';
  /** Saves and enqueues that reached Redis, by replica, in order. */
  const writes: string[] = [];
  /** The model calls made, by replica, in order. */
  const asks: Replica[] = [];
  const calls = new Map<Replica, HeldCall>();
  /** Errors each replica's worker reported, with when. */
  const workerErrors: Array<{ replica: Replica; at: number; message: string }> = [];
  const connections: Redis[] = [];
  const workers: Array<Worker<AgentJobData, void, AgentJobName>> = [];
  const queues: Array<Queue<AgentJobData, void, AgentJobName>> = [];
  let redis: PrivateRedis;
  let sandbox: LocalSandbox;
  let gateway: MemoryKubeGateway;

  beforeAll(async () => {
    redis = await PrivateRedis.start({ aof: false });
    const workspace = path.join(scratch, 'workspace');
    const home = path.join(scratch, 'home');
    mkdirSync(workspace, { recursive: true });
    mkdirSync(home, { recursive: true });
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd: workspace });
    git('init', '-q', '-b', 'main');
    writeFileSync(path.join(workspace, 'README.md'), 'hello\n');
    git('add', '.');
    git('commit', '-qm', 'init');
    sandbox = await createLocalSandbox({ mode: 'serve', workspaceDir: workspace, homeDir: home });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.close(true)));
    await Promise.all(queues.map((queue) => queue.close()));
    for (const connection of connections) connection.disconnect();
    await sandbox?.close();
    await redis?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('stops the first worker before its next write, and the run finishes on the second', async () => {
    const run = runningCodingRun(ref, { budget: { maxSteps: 5 } });
    gateway = new MemoryKubeGateway(run, { configMaps: new Map(), secrets: new Map() }, () => undefined);
    const resources = memoryRunResources(gateway);
    // The replicas share the stateKey, as the chart's Secret makes them.
    const seal = RunStateSeal.generated();
    const connect = () => {
      const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
      connections.push(connection);
      return connection;
    };

    const startReplica = (replica: Replica): AgentQueue => {
      const stateRedis = connect();
      const queueRedis = connect();
      const states = new RecordingStore(stateRedis, prefix, seal, replica, writes);
      const sandboxes = new SandboxPool(() => sandbox);
      const queue = new Queue<AgentJobData, void, AgentJobName>(QUEUE_NAME, { connection: queueRedis, prefix });
      queues.push(queue);
      const agentQueue = new AgentQueue(queue, states, sandboxes, seal, queueRedis, new RunJobIndex(queueRedis, prefix));
      const enqueuer: JobEnqueuer = {
        step: (to, completed) => (writes.push(`${replica} enqueue step ${completed}`), agentQueue.step(to, completed)),
        finalize: (to, round) => (writes.push(`${replica} enqueue finalize`), agentQueue.finalize(to, round)),
        publish: (to) => (writes.push(`${replica} enqueue publish`), agentQueue.publish(to)),
      };
      const deps: AgentDependencies = {
        states,
        status: new RunStatusWriter(gateway),
        resources,
        sandboxes,
        queue: enqueuer,
        models: async () => {
          asks.push(replica);
          return answerModel(replica, calls);
        },
        events: new EventRecorder(gateway, 'test', quiet),
        transcript: memoryTranscriptWriter(gateway, () => undefined),
        metrics: new OperatorMetrics({ defaultMetrics: false }),
        getRun: (namespace, name) => gateway.getRun(namespace, name),
        clonePolicy: { allowRepo: [], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 10_000 },
        logger: quiet,
        now: () => new Date(),
      };
      const worker = startAgentWorker(deps, {
        connection: connect(),
        prefix,
        concurrency: 1,
        lockDurationMs: LOCK_MS,
        stalledIntervalMs: STALLED_MS,
        seal,
      });
      worker.on('error', (error) => workerErrors.push({ replica, at: Date.now(), message: error.message }));
      workers.push(worker);
      return agentQueue;
    };

    // The state the prepare job leaves, and the first step queued: A takes it alone.
    const queueA = startReplica('A');
    await new RunStateStore(connect(), prefix, seal).create(startingState(ref, Date.now()));
    await queueA.step(ref, 0);
    const heldA = await eventually(async () => calls.get('A'), 30_000, 'A to ask the model');
    startReplica('B');

    redis.freeze();
    await sleep(FROZEN_MS);
    redis.thaw();
    const heldB = await eventually(async () => calls.get('B'), 30_000, "B to take the step once A's lock ran out");

    // A's answer comes while B works on the step: its attempt ends (BullMQ then reports A's
    // job as not A's to finish), and nothing of it reaches Redis.
    const releasedA = Date.now();
    heldA.release();
    await eventually(
      // Not the renewals BullMQ keeps trying while the attempt runs: the report of its end.
      async () =>
        workerErrors.find(
          (error) =>
            error.replica === 'A' &&
            error.at >= releasedA &&
            error.message.includes(ref.uid) &&
            !error.message.startsWith('could not renew'),
        ),
      15_000,
      "A's attempt to end",
    );
    expect(writes).toEqual([]);
    // The lease reached the model call too: a provider that honours the signal stops there.
    expect(heldA.signal?.aborted).toBe(true);

    heldB.release();
    const ended = await eventually(
      async () => {
        const status = gateway.current()?.status;
        return status?.phase === 'Succeeded' || status?.phase === 'Failed' ? status : undefined;
      },
      30_000,
      'the run to end',
    );
    expect(ended).toMatchObject({ phase: 'Succeeded', steps: 1, result: { summary: 'the answer B got' } });
    expect(ended.usage).toMatchObject({ totalTokens: 42 });
    expect(writes).toEqual(['B save finalizing 1', 'B enqueue finalize']);
    // The step's model asked once by each attempt that ran it, the one cut off included.
    expect(asks).toEqual(['A', 'B']);
    // The run's state is gone with the run (finalize forgot it); no save came after.
    expect(await connections[0]!.exists(`${prefix}:run:${ref.uid}`)).toBe(0);
  });
});
