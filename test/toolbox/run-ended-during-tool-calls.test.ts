// A step whose run ended while its tool calls ran (the controller's ending of a cancel, a
// deletion): the stop that ended it deleted the run's state in Redis and could not remove the
// running job. The save after each call that changes the workspace, and the step's save at its
// end, wrote the state back: the step's other calls ran against the sandbox the ending was
// deleting, the next step was queued, and for a Cancelled run (which the leftover-state sweep
// keeps) the state stayed in Redis, counted against its namespace's state-bytes budget, until
// the run was deleted. A real redis-server; the sandbox a recorder of every call made to it
// that, on the step's first call, deletes the state as the controller's stop does.
import type { LanguageModelV4Content } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import type { Sandbox, ToolRequest } from '../../operator/src/sandbox/sandbox.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { runAgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { TrailingWrites } from '../../operator/src/workers/trailing-record.ts';
import { generatingModel } from '../support/generating-model.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const server = redisServerForSuite();
let rows = 0;

// Two calls on the same file keep their order (tool-call-ordering.ts): the second starts only once the first is kept.
const twoWrites = [
  { toolName: 'write_file', input: { path: 'written.txt', content: 'one' } },
  { toolName: 'write_file', input: { path: 'written.txt', content: 'two' } },
];
// Nothing is saved between reads: the step's save at its end is the one that would bring the state back.
const twoReads = [
  { toolName: 'read_file', input: { path: 'README.md' } },
  { toolName: 'read_file', input: { path: 'README.md' } },
];

/**
 * A run at step 0 whose model answers with `calls`; its sandbox records every call and, when
 * `stopOnFirstCall`, deletes the run's state during the first (the controller's stop).
 * `trailing`: the step's record trails its hand-over (trailing-record.ts), as in a deployment.
 */
async function runAnswering(calls: readonly { toolName: string; input: unknown }[], stopOnFirstCall: boolean, trailing = false) {
  rows += 1;
  const ref = { uid: `uid-${rows}`, namespace: 'agents', name: `run-${rows}` };
  const prefix = `ended-during-tool-calls-${rows}`;
  const run: CodingRun = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { ...ref, generation: 1, resourceVersion: '1' },
    spec: {
      task: 'Say hi.',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'scripted', scriptRef: { name: 'script', key: 'script.json' } },
      budget: { maxSteps: 20, timeout: '30m' },
    } as CodingRun['spec'],
    status: { phase: 'Running', startTime: new Date().toISOString(), message: 'The agent is working.' },
  };
  const gateway = new MemoryKubeGateway(run, { configMaps: new Map(), secrets: new Map() }, () => {});
  const logger = { info() {}, warn() {}, error() {}, child: () => logger };
  const states = new RunStateStore(server.redis, prefix, RunStateSeal.generated());
  const sandboxCalls: ToolRequest[] = [];
  const sandbox: Sandbox = {
    call: async (request) => {
      sandboxCalls.push(request);
      if (stopOnFirstCall && sandboxCalls.length === 1) await states.delete(ref);
      return { ok: true, result: {} };
    },
    importTree: async () => {
      throw new Error('no import in a step');
    },
    close: async () => {},
  };
  const model = generatingModel(
    'ends-during-calls',
    async () =>
      calls.map((call, index) => ({
        type: 'tool-call',
        toolCallId: `c${index + 1}`,
        toolName: call.toolName,
        input: JSON.stringify(call.input),
      })) as LanguageModelV4Content[],
  );
  const enqueued: string[] = [];
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
    transcript: memoryTranscriptWriter(gateway, () => {}),
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    getRun: (namespace, name) => gateway.getRun(namespace, name),
    clonePolicy: { allowRepo: [], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 10_000 },
    logger,
    now: () => new Date(),
    ...(trailing ? { trailing: new TrailingWrites() } : {}),
  };
  await states.create(startingState(ref, Date.now()));
  const step = (completed: number) =>
    runAgentJob(deps, { name: 'step', data: { ...ref, step: completed }, attempt: 1, attempts: 10 }).then(
      () => 'done',
      (error: unknown) => error,
    );
  /** The run's entry in its namespace's state-bytes tally (1 when there is one). */
  const tallied = () => server.redis.hexists(`${prefix}:state-bytes:${ref.namespace}`, ref.uid);
  return { ref, states, sandboxCalls, enqueued, step, tallied };
}

describe('a step whose run ended while its tool calls ran', () => {
  it('runs no more of its calls after a write whose save finds the state gone, and leaves no state and no tally entry', async () => {
    const h = await runAnswering(twoWrites, true);
    expect(await h.step(0)).toBe('done');
    expect(h.sandboxCalls.map((request) => request.input)).toEqual([twoWrites[0]!.input]);
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(await h.tallied()).toBe(0);
    expect(h.enqueued).toEqual([]);
  });

  it('does not bring the state back after a step of one write, whose save waits for the diff snapshot', async () => {
    const h = await runAnswering(twoWrites.slice(0, 1), true);
    expect(await h.step(0)).toBe('done');
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(await h.tallied()).toBe(0);
    expect(h.enqueued).toEqual([]);
  });

  it.each([
    ['its record written before the save', false],
    ['its record trailing the save', true],
  ])('does not bring the state back at the end of a step of reads, nor queue the next step (%s)', async (_what, trailing) => {
    const h = await runAnswering(twoReads, true, trailing);
    expect(await h.step(0)).toBe('done');
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(await h.tallied()).toBe(0);
    expect(h.enqueued).toEqual([]);
  });

  it('runs both calls and goes on to the next step while the state is there', async () => {
    const h = await runAnswering(twoWrites, false);
    expect(await h.step(0)).toBe('done');
    expect(h.sandboxCalls.filter((request) => request.tool === 'write_file').map((request) => request.input)).toEqual(
      twoWrites.map((call) => call.input),
    );
    expect((await h.states.load(h.ref))?.step).toBe(1);
    expect(await h.tallied()).toBe(1);
    expect(h.enqueued).toEqual(['step 1']);
  });
});
