// A job that finds its run's cancel requested is put off by the worker, its tries unspent
// (job-failure.ts, agent-worker.ts). Retried instead, it spent BullMQ's ten tries in about 90 s
// and was left, done with: a cancel withdrawn after that lost the step (StateLost) or held an
// approved call's resume an hour (BullMQ keeps a completed job's id that long). The worker of
// agent-runtime.ts, a real redis-server and the in-memory API server of `run --local`.
import { Queue, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { AgentQueue } from '../../operator/src/workers/agent-queue.ts';
import { startAgentWorker } from '../../operator/src/workers/agent-worker.ts';
import { QUEUE_NAME, jobId, type AgentJobData, type AgentJobName } from '../../operator/src/workers/job-ids.ts';
import { CANCEL_RECHECK_DELAY_MS } from '../../operator/src/workers/job-failure.ts';
import { RunJobIndex } from '../../operator/src/workers/run-job-index.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { eventually } from '../support/operator-process.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const redis = redisServerForSuite();
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

describe('a job that finds a cancel requested', () => {
  it('is put off under its own id, delayed, its tries unspent however often it looks', async () => {
    const ref = { uid: 'uid-put-off', namespace: 'agents', name: 'put-off' };
    const run: CodingRun = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { ...ref, generation: 1, resourceVersion: '1', annotations: { [CANCEL_ANNOTATION]: 'wrong branch' } },
      spec: {
        task: 'Say hi.',
        repository: { url: 'https://github.com/acme/webapp.git' },
        model: { provider: 'scripted', scriptRef: { name: 'script', key: 'script.json' } },
        budget: { maxSteps: 20, timeout: '30m' },
      } as CodingRun['spec'],
      status: { phase: 'Running', startTime: new Date().toISOString(), message: 'The agent is working.' },
    };
    const gateway = new MemoryKubeGateway(run, { configMaps: new Map(), secrets: new Map() }, () => {});
    const connect = () => {
      const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
      closers.push(async () => connection.disconnect());
      return connection;
    };
    const prefix = 'cancel-put-off';
    const seal = RunStateSeal.generated();
    const logger = { info() {}, warn() {}, error() {}, child: () => logger };
    const states = new RunStateStore(connect(), prefix, seal);
    const sandboxes = new SandboxPool(() => {
      throw new Error('no sandbox is used before the model call');
    });
    const queueRedis = connect();
    const queue = new Queue<AgentJobData, void, AgentJobName>(QUEUE_NAME, { connection: queueRedis, prefix });
    closers.push(() => queue.close());
    const agentQueue = new AgentQueue(queue, states, sandboxes, seal, queueRedis, new RunJobIndex(queueRedis, prefix));
    const deps: AgentDependencies = {
      states,
      status: new RunStatusWriter(gateway),
      resources: memoryRunResources(gateway),
      sandboxes,
      queue: agentQueue,
      models: async () => {
        throw new Error('the model is not asked while a cancel is requested');
      },
      events: new EventRecorder(gateway, 'test', logger),
      transcript: memoryTranscriptWriter(gateway, () => undefined),
      metrics: new OperatorMetrics({ defaultMetrics: false }),
      getRun: (namespace, name) => gateway.getRun(namespace, name),
      clonePolicy: { allowRepo: [], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 10_000 },
      logger,
      now: () => new Date(),
    };
    await states.create(startingState(ref, Date.now()));
    const worker = startAgentWorker(deps, { connection: connect(), prefix, concurrency: 1, seal });
    closers.push(() => worker.close());

    const id = jobId.step(ref.uid, 0);
    /** The job, once the worker has put it off after its `look`th look. */
    const putOff = (look: number): Promise<Job> =>
      eventually(async () => {
        const job = await queue.getJob(id);
        return job && job.attemptsStarted === look && (await queue.getJobState(id)) === 'delayed' ? job : undefined;
      }, 10_000);
    await agentQueue.step(ref, 0);
    // It looks again more often than a retried job would before its backoff grew: no try is spent.
    for (let look = 1; look <= 3; look++) {
      const job = await putOff(look);
      expect(job.attemptsMade).toBe(0);
      // Until the cancel's look-again time, not a retry's backoff.
      const score = Number(await queueRedis.zscore(`${prefix}:${QUEUE_NAME}:delayed`, id));
      expect(Math.floor(score / 0x1000) - Date.now()).toBeGreaterThan(CANCEL_RECHECK_DELAY_MS - 5_000);
      await job.promote();
    }
    expect(await states.load(ref)).toEqual(expect.objectContaining({ stage: 'stepping', step: 0 }));
  }, 60_000);
});
