// A resume whose run ended while the approved call ran (approval.tools [bash]; the model asked
// for `bash ./deploy.sh`, write_file and edit_file; the deploy takes minutes, and a cancel's
// ending or a deletion ends the run meanwhile, its stop deleting the state in Redis). The
// resume job saved the state back with a plain save, ran write_file and edit_file against the
// sandbox the ending was deleting, and queued a step. The same for a publish approval answered
// as the run ended: the state came back and the publish job was queued. A real redis-server;
// the model a stand-in; the sandbox a recorder of every call made to it, whose bash call is
// where the stop comes, as it would during a long deploy.
import type { LanguageModelV4Content } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { approvalInputJson, approvalInputSha256 } from '../../operator/src/reconcile/approval-answer.ts';
import type { Sandbox, ToolRequest } from '../../operator/src/sandbox/sandbox.ts';
import type { AgentDependencies, RunRef } from '../../operator/src/workers/agent-dependencies.ts';
import { PUBLISH_APPROVAL_ID } from '../../operator/src/workers/publish-wait.ts';
import { runAgentJob, type AgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { generatingModel } from '../support/generating-model.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const server = redisServerForSuite();
let rows = 0;

const answer = [
  { toolName: 'bash', input: { command: './deploy.sh' } },
  { toolName: 'write_file', input: { path: 'a', content: 'a' } },
  { toolName: 'edit_file', input: { path: 'b', oldString: 'x', newString: 'y' } },
];
const changesWorkspace = (request: ToolRequest) => request.tool === 'write_file' || request.tool === 'edit_file';

/** A run (bash gated) on a replica holding no copy of it, its sandbox recording every call; `duringBash` is done as bash runs. */
async function harness(spec: Partial<CodingRun['spec']> = {}) {
  rows += 1;
  const ref = { uid: `uid-${rows}`, namespace: 'agents', name: `run-${rows}` };
  const run: CodingRun = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { ...ref, generation: 1, resourceVersion: '1' },
    spec: {
      task: 'Deploy.',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'scripted', scriptRef: { name: 'script', key: 'script.json' } },
      approval: { tools: ['bash'] },
      budget: { maxSteps: 20, timeout: '30m' },
      ...spec,
    } as CodingRun['spec'],
    status: { phase: 'Running', startTime: new Date().toISOString(), message: 'The agent is working.' },
  };
  const gateway = new MemoryKubeGateway(run, { configMaps: new Map(), secrets: new Map() }, () => {});
  const logger = { info() {}, warn() {}, error() {}, child: () => logger };
  const states = new RunStateStore(server.redis, `ended-during-approved-call-${rows}`, RunStateSeal.generated());
  const sandboxCalls: ToolRequest[] = [];
  const hooks = { duringBash: async () => {} };
  const sandbox: Sandbox = {
    call: async (request) => {
      sandboxCalls.push(request);
      if (request.tool === 'bash') await hooks.duringBash();
      return { ok: true, result: {} };
    },
    importTree: async () => {
      throw new Error('no import in a step');
    },
    close: async () => {},
  };
  const model = generatingModel(
    'asks-to-deploy',
    async () =>
      answer.map((call, index) => ({
        type: 'tool-call',
        toolCallId: `c${index + 1}`,
        toolName: call.toolName,
        input: JSON.stringify(call.input),
      })) as LanguageModelV4Content[],
  );
  const enqueued: string[] = [];
  const read = (namespace: string, name: string) => gateway.getRun(namespace, name);
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
    getRunHeld: () => undefined,
    clonePolicy: { allowRepo: [], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 10_000 },
    logger,
    now: () => new Date(),
  };
  await states.create(startingState(ref, Date.now()));
  const job = (name: AgentJob['name'], data: Partial<AgentJob['data']>): Promise<unknown> =>
    runAgentJob(deps, { name, data: { ...ref, ...data }, attempt: 1, attempts: 10 }).then(
      () => 'done',
      (error: unknown) => error,
    );
  return { deps, ref, states, gateway, sandboxCalls, hooks, enqueued, job };
}

/** The controller's stop (agent-queue.ts stop): the run's state deleted while its job runs. */
const stopDeletesState = (h: { states: RunStateStore; ref: RunRef }) => () => h.states.delete(h.ref);

/** The step that parks on the bash call, then the approve of what it parked on. */
async function parkedThenApproved(h: Awaited<ReturnType<typeof harness>>) {
  expect(await h.job('step', { step: 0 })).toBe('done');
  const pending = h.gateway.current()!.status!.pendingApproval!;
  expect(pending.toolName).toBe('bash');
  expect(h.sandboxCalls).toEqual([]);
  return h.job('resume', { approval: { id: pending.id, decision: 'approve', sha256: pending.inputSha256, user: 'alice' } });
}

describe('a run ended while its approved call ran', () => {
  it('runs none of the calls after it, does not bring the state back, and queues no step', async () => {
    const h = await harness();
    h.hooks.duringBash = stopDeletesState(h);
    expect(await parkedThenApproved(h)).toBe('done');
    expect(h.sandboxCalls.map((request) => request.tool)).toContain('bash');
    expect(h.sandboxCalls.filter(changesWorkspace)).toEqual([]);
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(h.enqueued).toEqual([]);
  });

  it('runs the calls after it while the state is there', async () => {
    const h = await harness();
    expect(await parkedThenApproved(h)).toBe('done');
    expect(h.sandboxCalls.filter(changesWorkspace).map((request) => request.tool)).toEqual(['write_file', 'edit_file']);
    expect(await h.states.loadText(h.ref.uid)).toBeDefined();
    expect(h.enqueued).toEqual(['step 1']);
  });
});

describe('a run ended as its publish approval was approved', () => {
  /** A run waiting on its publish approval, as finalize parked it. */
  async function waitingToPublish() {
    const h = await harness();
    const state = (await h.states.load(h.ref))!;
    const input = { branch: 'chamvi/run', diffSha256: 'f'.repeat(64) };
    state.stage = 'waiting';
    state.publish = { diffSha256: input.diffSha256 };
    state.pendingApproval = {
      id: PUBLISH_APPROVAL_ID,
      toolCallId: PUBLISH_APPROVAL_ID,
      toolName: PUBLISH_APPROVAL_ID,
      input,
      requestedAt: new Date().toISOString(),
      results: [],
      remaining: [],
    };
    await h.states.save(state);
    const approve = () =>
      h.job('resume', {
        approval: { id: PUBLISH_APPROVAL_ID, decision: 'approve', sha256: approvalInputSha256(approvalInputJson(input)), user: 'alice' },
      });
    return { ...h, approve };
  }

  it('is not handed to the publish job, and its state is not brought back', async () => {
    const h = await waitingToPublish();
    // The cancel's ending comes right after the approve's status write, and its stop deletes the state.
    const write = h.deps.status.write.bind(h.deps.status);
    h.deps.status = Object.assign(Object.create(h.deps.status) as typeof h.deps.status, {
      write: async (...args: Parameters<typeof write>) => {
        const outcome = await write(...args);
        await h.states.delete(h.ref);
        return outcome;
      },
    });
    expect(await h.approve()).toBe('done');
    expect(await h.states.loadText(h.ref.uid)).toBeUndefined();
    expect(h.enqueued).toEqual([]);
  });

  it('is handed to the publish job while the state is there', async () => {
    const h = await waitingToPublish();
    expect(await h.approve()).toBe('done');
    expect((await h.states.load(h.ref))!.stage).toBe('publishing');
    expect(h.enqueued).toEqual(['publish']);
  });
});
