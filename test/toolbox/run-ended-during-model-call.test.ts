// A step whose run ended while the model answered (the controller's ending of a cancel, a
// deletion): the stop that ended it deleted the run's state in Redis and could not remove the
// running job. On a replica that is not the leader, past a model call of more than ~2 s, the job
// holds no copy of the run (kube/recent-runs.ts readHeld) to see the end in, and the answer's
// tool calls ran against the sandbox the ending was deleting (a save before a write_file brought
// the state back). The state's absence in Redis is what the job looks at now. A real
// redis-server; the model a stand-in that deletes the state as the controller's stop does, while
// it answers; the sandbox a recorder of every call made to it.
import type { LanguageModelV4Content } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import type { Sandbox, ToolRequest } from '../../operator/src/sandbox/sandbox.ts';
import type { AgentDependencies, RunRef } from '../../operator/src/workers/agent-dependencies.ts';
import { RunStateGoneError } from '../../operator/src/workers/errors/run-state-gone-error.ts';
import { runAgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { RunStateStore, type RunState } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { generatingModel } from '../support/generating-model.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const server = redisServerForSuite();
let rows = 0;

const writes = { toolName: 'write_file', input: { path: 'written.txt', content: 'hi' } };
const reads = { toolName: 'read_file', input: { path: 'README.md' } };

/**
 * A run at step 0 whose model answers with `call` after `meanwhile` (the controller's stop,
 * here), on a replica holding no copy of the run, its sandbox recording every call.
 */
async function runAnswering(
  call: { toolName: string; input: unknown },
  meanwhile: (h: { states: RunStateStore; ref: RunRef }) => Promise<void>,
) {
  rows += 1;
  const ref = { uid: `uid-${rows}`, namespace: 'agents', name: `run-${rows}` };
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
  const states = new RunStateStore(server.redis, `ended-during-model-call-${rows}`, RunStateSeal.generated());
  const sandboxCalls: ToolRequest[] = [];
  const sandbox: Sandbox = {
    call: async (request) => {
      sandboxCalls.push(request);
      return { ok: true, result: {} };
    },
    importTree: async () => {
      throw new Error('no import in a step');
    },
    close: async () => {},
  };
  const model = generatingModel('ends-meanwhile', async () => {
    await meanwhile({ states, ref });
    return [
      { type: 'tool-call', toolCallId: 'c1', toolName: call.toolName, input: JSON.stringify(call.input) },
    ] as LanguageModelV4Content[];
  });
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
    transcript: memoryTranscriptWriter(gateway, () => {}),
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    getRun: read,
    getRunFresh: read,
    // A replica that is not the leader, past the bound: it holds no copy of the run.
    getRunHeld: () => undefined,
    clonePolicy: { allowRepo: [], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 10_000 },
    logger,
    now: () => new Date(),
  };
  await states.create(startingState(ref, Date.now()));
  const step = (completed: number) =>
    runAgentJob(deps, { name: 'step', data: { ...ref, step: completed }, attempt: 1, attempts: 10 }).then(
      () => 'done',
      (error: unknown) => error,
    );
  return { deps, ref, states, gateway, sandboxCalls, enqueued, step, runReads: () => runReads };
}

/** The controller's stop (agent-queue.ts stop): the run's state deleted while its job runs. */
const stopDeletesState = async (h: { states: RunStateStore; ref: RunRef }) => h.states.delete(h.ref);
const withCancel = (run: CodingRun) => ({
  ...run,
  metadata: { ...run.metadata, annotations: { ...run.metadata.annotations, [CANCEL_ANNOTATION]: 'wrong branch' } },
});

describe('a step whose run ended during the model call, on a replica holding no copy of the run', () => {
  it.each([
    ['a call that changes the workspace (the state saved before it, only over one still there)', writes],
    ['a read (nothing saved before it: the state looked for)', reads],
  ])('runs no tool call for %s, and does not bring the state back', async (_what, call) => {
    const h = await runAnswering(call, stopDeletesState);
    const outcome = await h.step(0);
    expect(h.sandboxCalls).toEqual([]);
    expect(outcome).toBe('done');
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(h.enqueued).toEqual([]);
    // Only the step's start read the run: the look cost no request to the API server.
    expect(h.runReads()).toBe(1);
  });

  it('runs its calls while the state is there', async () => {
    const h = await runAnswering(writes, async () => {});
    expect(await h.step(0)).toBe('done');
    expect(h.sandboxCalls.map((request) => request.tool)).toContain('write_file');
    expect(h.enqueued).toEqual(['step 1']);
  });

  it('a held copy showing a cancel, the run ended too (its state gone): the answer is not saved back, and no call runs', async () => {
    const h = await runAnswering(writes, stopDeletesState);
    h.deps.getRunHeld = () => withCancel(h.gateway.current()!);
    expect(await h.step(0)).toBe('done');
    expect(h.sandboxCalls).toEqual([]);
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
  });
});

describe('a step in flight redone (an earlier try got the answer and died)', () => {
  it('reads the run once for both its cancel look and its calls', async () => {
    const h = await runAnswering(reads, async () => {});
    const state = (await h.states.load(h.ref))!;
    const call = { toolCallId: 'c9', ...reads };
    state.messages.push({ role: 'assistant', content: [{ type: 'tool-call', ...call }] });
    state.step = 1;
    state.inFlight = {
      calls: [call],
      results: [],
      earlier: [],
      hadToolCalls: true,
      toolNames: [call.toolName],
      text: '',
      resumed: false,
      record: { startedAt: new Date().toISOString() },
    };
    await h.states.save(state);
    expect(await h.step(0)).toBe('done');
    expect(h.sandboxCalls.map((request) => request.tool)).toContain('read_file');
    expect(h.runReads()).toBe(1);
  });
});

describe('RunStateStore.save ifPresent', () => {
  const state = (uid: string): RunState => startingState({ uid, namespace: 'agents', name: uid }, Date.now());

  it('writes over a state that is there', async () => {
    const states = new RunStateStore(server.redis, 'save-if-present', RunStateSeal.generated());
    await states.create(state('there'));
    const moved = { ...state('there'), step: 3 };
    await states.save(moved, { ifPresent: true });
    expect((await states.load(moved))!.step).toBe(3);
  });

  it('writes nothing where the state is gone, the tally included, and says so', async () => {
    const states = new RunStateStore(server.redis, 'save-if-present', RunStateSeal.generated());
    await states.create(state('gone'));
    await states.delete(state('gone'));
    const failure = await states.save(state('gone'), { ifPresent: true }).catch((error: unknown) => error);
    expect(RunStateGoneError.isInstance(failure)).toBe(true);
    expect(await states.loadText('gone')).toBeUndefined();
    expect(await states.exists('gone')).toBe(false);
    expect(await server.redis.hexists('save-if-present:state-bytes:agents', 'gone')).toBe(0);
  });
});
