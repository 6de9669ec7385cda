// The worker's half of config.maxApprovalWaitSeconds: an answered approval moves the run's
// deadline on (its state's startedAt) by no more than the controller moves its own
// (reconcile/approval-wait.ts), so the agent and the controller end the run at the same time.
// The jobs run as the worker runs them, on real parts: the bundled toolbox in a local sandbox
// (hence this tier), the scripted model, the in-memory API server of `run --local` and a real
// redis-server. Only the queue is a recorder.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from '../../operator/src/providers/calling-policy.ts';
import type { ScriptedTurn } from '../../operator/src/providers/scripted/model-script-schema.ts';
import { createLocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import type { AgentDependencies, RunRef } from '../../operator/src/workers/agent-dependencies.ts';
import { createModelFactory } from '../../operator/src/workers/model-factory.ts';
import { runAgentJob, type AgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const server = redisServerForSuite();
const scratch = mkdtempSync(path.join(tmpdir(), 'chamvi-approval-wait-'));
let rows = 0;
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const usage = { inputTokens: 10, outputTokens: 2 };
const asksForBash: ScriptedTurn = { toolCalls: [{ toolName: 'bash', input: { command: 'echo hi' } }], usage };
const answers: ScriptedTurn = { text: 'done', usage };
const job = (name: AgentJob['name'], ref: RunRef, extra: Partial<AgentJob['data']> = {}): AgentJob => ({
  name,
  data: { ...ref, ...extra },
  attempt: 1,
  attempts: 10,
});

/** A run (budget.timeout 30m, bash gated) whose first step parked its bash call, and the jobs it handed on. */
async function parkedRun() {
  rows += 1;
  const ref = { uid: `uid-${rows}`, namespace: 'agents', name: `run-${rows}` };
  const workspace = path.join(scratch, `row-${rows}`, 'workspace');
  const home = path.join(scratch, `row-${rows}`, 'home');
  execFileSync('mkdir', ['-p', workspace, home]);
  const run: CodingRun = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { ...ref, generation: 1, resourceVersion: '1' },
    spec: {
      task: 'Say hi.',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'scripted', scriptRef: { name: 'script', key: 'script.json' } },
      approval: { tools: ['bash'] },
      budget: { maxSteps: 20, timeout: '30m' },
    } as CodingRun['spec'],
    status: { phase: 'Running', startTime: new Date().toISOString(), message: 'The agent is working.' },
  };
  const script = JSON.stringify({ turns: [asksForBash, answers] });
  const gateway = new MemoryKubeGateway(
    run,
    { configMaps: new Map([['script', { data: { 'script.json': script }, binaryData: {} }]]), secrets: new Map() },
    () => {},
  );
  const logger = { info() {}, warn() {}, error() {}, child: () => logger };
  const states = new RunStateStore(server.redis, `approval-wait-${rows}`, RunStateSeal.generated());
  const sandbox = await createLocalSandbox({ mode: 'serve', workspaceDir: workspace, homeDir: home });
  const enqueued: string[] = [];
  const resources = memoryRunResources(gateway);
  const deps: AgentDependencies = {
    states,
    status: new RunStatusWriter(gateway),
    resources,
    sandboxes: new SandboxPool(() => sandbox),
    queue: {
      step: async (_ref, completed) => void enqueued.push(`step ${completed}`),
      finalize: async () => void enqueued.push('finalize'),
      publish: async () => void enqueued.push('publish'),
    },
    models: createModelFactory(resources, DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies()),
    events: new EventRecorder(gateway, 'test', logger),
    transcript: memoryTranscriptWriter(gateway, () => {}),
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    getRun: (namespace, name) => gateway.getRun(namespace, name),
    clonePolicy: { allowRepo: [], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 10_000 },
    logger,
    now: () => new Date(),
  };
  await states.create(startingState(ref, Date.now()));
  await runAgentJob(deps, job('step', ref, { step: 0 }));
  const pending = gateway.current()!.status!.pendingApproval!;
  return { deps, ref, states, gateway, enqueued, pending, close: () => sandbox.close() };
}

describe('an approval answered an hour after it was asked', () => {
  const hour = 3600_000;

  it("moves the run's deadline on by the whole hour within the bound: the run goes on", async () => {
    const h = await parkedRun();
    try {
      const before = (await h.states.load(h.ref))!.startedAt;
      const later = { ...h.deps, maxApprovalWaitMs: 2 * hour, now: () => new Date(Date.parse(h.pending.requestedAt) + hour) };
      await runAgentJob(later, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
      const state = (await h.states.load(h.ref))!;
      expect(state.startedAt - before).toBe(hour);
      expect(h.enqueued).toEqual(['step 1']);
    } finally {
      await h.close();
    }
  });

  it('moves it by no more than maxApprovalWaitSeconds: the rest is the run’s time, which ends its 30m budget', async () => {
    const h = await parkedRun();
    try {
      const before = (await h.states.load(h.ref))!.startedAt;
      const bound = 10 * 60_000;
      const later = { ...h.deps, maxApprovalWaitMs: bound, now: () => new Date(Date.parse(h.pending.requestedAt) + hour) };
      await runAgentJob(later, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
      const state = (await h.states.load(h.ref))!;
      expect(state.startedAt - before).toBe(bound);
      // The whole wait is still recorded (status.approvalWaitSeconds), as the controller counts it.
      expect(state.approvalWaitMs).toBe(hour);
      expect(h.gateway.current()!.status!.approvalWaitSeconds).toBe(3600);
      expect(h.enqueued).toEqual(['finalize']);
      expect(state.stop?.reason).toBe('DeadlineExceeded');
    } finally {
      await h.close();
    }
  });
});
