// The worker's half of config.maxApprovalWaitSeconds: an answered approval moves the run's
// deadline on (its state's startedAt) by no more than the controller moves its own
// (reconcile/approval-wait.ts), so the agent and the controller end the run at the same time.
// The jobs run as the worker runs them, on real parts: the bundled toolbox in a local sandbox
// (hence this tier), the scripted model, the in-memory API server of `run --local` and a real
// redis-server. Only the queue is a recorder.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { CANCEL_ANNOTATION } from '../../operator/src/reconcile/cancel-request.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from '../../operator/src/providers/calling-policy.ts';
import type { ScriptedTurn } from '../../operator/src/providers/scripted/model-script-schema.ts';
import { createLocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import type { AgentDependencies, RunRef } from '../../operator/src/workers/agent-dependencies.ts';
import { CancelRequestedError } from '../../operator/src/workers/errors/cancel-requested-error.ts';
import { createModelFactory } from '../../operator/src/workers/model-factory.ts';
import { runAgentJob, type AgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';
import { runningCodingRun } from '../support/running-coding-run.ts';

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

/** A run (budget.timeout 30m, bash gated) whose first step parked its bash call (`ask`), and the jobs it handed on. */
async function parkedRun(ask: ScriptedTurn = asksForBash, after: ScriptedTurn[] = [answers], spec: Partial<CodingRun['spec']> = {}) {
  rows += 1;
  const ref = { uid: `uid-${rows}`, namespace: 'agents', name: `run-${rows}` };
  const workspace = path.join(scratch, `row-${rows}`, 'workspace');
  const home = path.join(scratch, `row-${rows}`, 'home');
  execFileSync('mkdir', ['-p', workspace, home]);
  // A repository with a commit, as a clone leaves it: a diff take fails on a workspace git cannot diff.
  execFileSync('git', ['-C', workspace, 'init', '-q']);
  execFileSync('git', [
    '-C',
    workspace,
    '-c',
    'user.name=test',
    '-c',
    'user.email=test@example.com',
    'commit',
    '-q',
    '--allow-empty',
    '-m',
    'base',
  ]);
  const run = runningCodingRun(ref, { approval: { tools: ['bash'] }, budget: { maxSteps: 20, timeout: '30m' }, ...spec });
  const script = JSON.stringify({ turns: [ask, ...after] });
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
  return { deps, ref, states, gateway, enqueued, pending, workspace, close: () => sandbox.close() };
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

// resume-job.ts: an approved call the run's deadline had passed before is not sent. A retried
// resume job (its first try ran the call, then its save failed or its lock was lost) finds the
// state still waiting and past the deadline once the wait's allowance is spent: the call is not
// sent again, and the model is not told it did not run while the partial diff holds its change.
describe('an approved call whose resume is retried past the deadline', () => {
  const hour = 3600_000;
  const bound = 10 * 60_000;
  const appends: ScriptedTurn = { toolCalls: [{ toolName: 'bash', input: { command: 'echo ran >> ran.txt' } }], usage };

  /** What the model and the transcript are told of the approved call. */
  const resultText = (state: RunState, toolCallId: string): string => {
    for (const message of state.messages) {
      if (message.role !== 'tool') continue;
      const part = message.content.find((each) => each.type === 'tool-result' && each.toolCallId === toolCallId);
      if (part?.type === 'tool-result') return (part.output as { value: string }).value;
    }
    throw new Error(`no result for ${toolCallId}`);
  };

  it('is not sent again, and is told an earlier try may have run it', async () => {
    const h = await parkedRun(appends);
    try {
      const pending = (await h.states.load(h.ref))!.pendingApproval!;
      const approve = job('resume', h.ref, {
        approval: { id: h.pending.id, decision: 'approve', sha256: h.pending.inputSha256, user: 'alice' },
      });
      // Try 1, five minutes after the ask: the call runs, then keeping its result fails (a Redis blip).
      const failingSave = Object.assign(Object.create(h.states) as typeof h.states, {
        save: async () => {
          throw new Error('Redis did not answer');
        },
      });
      const first = {
        ...h.deps,
        states: failingSave,
        maxApprovalWaitMs: bound,
        now: () => new Date(Date.parse(h.pending.requestedAt) + 5 * 60_000),
      };
      await expect(runAgentJob(first, approve)).rejects.toThrow('Redis did not answer');
      expect(readFileSync(path.join(h.workspace, 'ran.txt'), 'utf8')).toBe('ran\n');
      expect((await h.states.load(h.ref))!.stage).toBe('waiting');

      // BullMQ's retry an hour after the ask: the wait moves the deadline on by 10 minutes, so it has passed.
      const retry = { ...h.deps, maxApprovalWaitMs: bound, now: () => new Date(Date.parse(h.pending.requestedAt) + hour) };
      await runAgentJob(retry, approve);
      const state = (await h.states.load(h.ref))!;
      const text = resultText(state, pending.toolCallId);
      expect(text).toContain('not sent again');
      expect(text).toContain('an earlier try of this step may have run it');
      expect(text).not.toContain('did not run');
      // It ran once, in try 1: its change is in the workspace (the partial diff), not made twice.
      expect(readFileSync(path.join(h.workspace, 'ran.txt'), 'utf8')).toBe('ran\n');
      expect(state.stop?.reason).toBe('DeadlineExceeded');
      expect(h.enqueued).toEqual(['finalize']);
    } finally {
      await h.close();
    }
  });

  it('in its first try, is told it did not run, and did not', async () => {
    const h = await parkedRun(appends);
    try {
      const pending = (await h.states.load(h.ref))!.pendingApproval!;
      const later = { ...h.deps, maxApprovalWaitMs: bound, now: () => new Date(Date.parse(h.pending.requestedAt) + hour) };
      await runAgentJob(
        later,
        job('resume', h.ref, { approval: { id: h.pending.id, decision: 'approve', sha256: h.pending.inputSha256, user: 'alice' } }),
      );
      const text = resultText((await h.states.load(h.ref))!, pending.toolCallId);
      expect(text).toContain('so it did not run');
      expect(() => readFileSync(path.join(h.workspace, 'ran.txt'), 'utf8')).toThrow(/ENOENT/);
    } finally {
      await h.close();
    }
  });
});

// A cancel (kubectl codingrun cancel) ends the run only once the controller has taken its diff,
// up to 30 s later, and until then the run reads as live: a job queued before it must not go on
// to run an approved call, ask the model or verify (live-run.ts runToActOn). It leaves the state
// as it is, for the controller's ending to take the diff against, and throws to be tried again
// (BullMQ keeps it, under its id, for its next try): a cancel withdrawn meanwhile lets it go on.
describe('a cancel requested while a job of the run waits in the queue or runs', () => {
  const writes: ScriptedTurn = { toolCalls: [{ toolName: 'write_file', input: { path: 'written.txt', content: 'hi' } }], usage };
  const appends: ScriptedTurn = { toolCalls: [{ toolName: 'bash', input: { command: 'echo ran >> ran.txt' } }], usage };

  /** The harness's deps, whose reads of the run carry the cancel annotation from read `from` on (1: every read). */
  const cancelledFrom = (h: Awaited<ReturnType<typeof parkedRun>>, from = 1): AgentDependencies => {
    let reads = 0;
    const read = async (namespace: string, name: string) => {
      const run = await h.gateway.getRun(namespace, name);
      reads += 1;
      if (!run || reads < from) return run;
      return { ...run, metadata: { ...run.metadata, annotations: { ...run.metadata.annotations, [CANCEL_ANNOTATION]: 'wrong branch' } } };
    };
    return { ...h.deps, getRun: read, getRunFresh: read };
  };
  const withCancel = (run: CodingRun | undefined) =>
    run && { ...run, metadata: { ...run.metadata, annotations: { ...run.metadata.annotations, [CANCEL_ANNOTATION]: 'wrong branch' } } };
  /** The job's try: it did nothing, and is to be tried again (not done with, as a job that returns is). */
  const triedAgainLater = (tried: Promise<void>) => expect(tried).rejects.toSatisfy(CancelRequestedError.isInstance);
  const fileIn = (h: { workspace: string }, name: string) => readFileSync(path.join(h.workspace, name), 'utf8');

  it('an approved call is not run, the state still waits on it, and the resume is tried again: a cancel withdrawn lets it run', async () => {
    const h = await parkedRun(appends);
    try {
      const enqueued = [...h.enqueued];
      await triedAgainLater(
        runAgentJob(
          cancelledFrom(h),
          job('resume', h.ref, { approval: { id: h.pending.id, decision: 'approve', sha256: h.pending.inputSha256, user: 'bob' } }),
        ),
      );
      expect(() => fileIn(h, 'ran.txt')).toThrow(/ENOENT/);
      const state = (await h.states.load(h.ref))!;
      expect(state.stage).toBe('waiting');
      expect(state.pendingApproval?.id).toBe(h.pending.id);
      expect(h.enqueued).toEqual(enqueued);
      // The cancel withdrawn: the job's next try runs the call.
      await runAgentJob(
        h.deps,
        job('resume', h.ref, { approval: { id: h.pending.id, decision: 'approve', sha256: h.pending.inputSha256, user: 'bob' } }),
      );
      expect(fileIn(h, 'ran.txt')).toBe('ran\n');
    } finally {
      await h.close();
    }
  });

  it('the next step does not ask the model, and is tried again: a cancel withdrawn lets it go on', async () => {
    const h = await parkedRun(asksForBash, [writes, answers]);
    try {
      await runAgentJob(h.deps, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
      expect(h.enqueued).toEqual(['step 1']);
      const before = (await h.states.load(h.ref))!;
      await triedAgainLater(runAgentJob(cancelledFrom(h), job('step', h.ref, { step: 1 })));
      const after = (await h.states.load(h.ref))!;
      expect(after.step).toBe(before.step);
      expect(after.messages).toEqual(before.messages);
      expect(after.usage).toEqual(before.usage);
      expect(() => fileIn(h, 'written.txt')).toThrow(/ENOENT/);
      expect(h.enqueued).toEqual(['step 1']);
      // The cancel withdrawn: the job's next try asks the model, runs its call and hands on.
      await runAgentJob(h.deps, job('step', h.ref, { step: 1 }));
      expect(fileIn(h, 'written.txt')).toBe('hi');
      expect(h.enqueued).toEqual(['step 1', 'step 2']);
    } finally {
      await h.close();
    }
  });

  it("a step in flight (an earlier try got the model's answer and died): its calls left are not run", async () => {
    const h = await parkedRun();
    try {
      await runAgentJob(h.deps, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
      // As an earlier try of step 1 left it: the model asked for a write, which did not run yet.
      const call = { toolCallId: 'c9', toolName: 'write_file', input: { path: 'in-flight.txt', content: 'hi' } };
      const state = (await h.states.load(h.ref))!;
      state.messages.push({ role: 'assistant', content: [{ type: 'tool-call', ...call }] });
      state.step += 1;
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
      await triedAgainLater(runAgentJob(cancelledFrom(h), job('step', h.ref, { step: 1 })));
      expect(() => fileIn(h, 'in-flight.txt')).toThrow(/ENOENT/);
      expect((await h.states.load(h.ref))!.inFlight?.calls).toEqual([call]);
      // Not cancelled: the retry finishes the step.
      await runAgentJob(h.deps, job('step', h.ref, { step: 1 }));
      expect(fileIn(h, 'in-flight.txt')).toBe('hi');
    } finally {
      await h.close();
    }
  });

  it("asked for during the model call: the answer's tool calls are not run, its tokens are in status.usage, and a cancel withdrawn runs them", async () => {
    const h = await parkedRun(asksForBash, [writes, answers]);
    try {
      await runAgentJob(h.deps, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
      const before = h.gateway.current()!.status!.usage!;
      // The step's first read finds the run live; the cancel comes while the model answers.
      await triedAgainLater(runAgentJob(cancelledFrom(h, 2), job('step', h.ref, { step: 1 })));
      expect(() => fileIn(h, 'written.txt')).toThrow(/ENOENT/);
      expect(h.enqueued).toEqual(['step 1']);
      const state = (await h.states.load(h.ref))!;
      expect(state.stage).toBe('stepping');
      // The answer is kept as the step in flight, and what it cost is shown (the ending keeps status.usage).
      expect(state.inFlight?.calls.map((call) => call.toolName)).toEqual(['write_file']);
      const shown = h.gateway.current()!.status!.usage!;
      expect(shown.inputTokens).toBe(before.inputTokens! + usage.inputTokens);
      expect(shown).toEqual(expect.objectContaining(state.usage));
      // The cancel withdrawn: the job's next try runs the kept calls, without asking the model again.
      await runAgentJob(h.deps, job('step', h.ref, { step: 1 }));
      expect(fileIn(h, 'written.txt')).toBe('hi');
      expect(h.enqueued).toEqual(['step 1', 'step 2']);
      expect(h.gateway.current()!.status!.usage!.inputTokens).toBe(shown.inputTokens);
    } finally {
      await h.close();
    }
  });

  it('asked for during the model call, looked for in the copy of the run this process holds, not with a read of its own (issue #17)', async () => {
    const h = await parkedRun(asksForBash, [writes, answers]);
    try {
      await runAgentJob(h.deps, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
      let reads = 0;
      const counted: AgentDependencies = {
        ...h.deps,
        getRun: (namespace, name) => ((reads += 1), h.gateway.getRun(namespace, name)),
        // The leader's cache (or a copy a write returned a moment ago) shows the cancel.
        getRunHeld: () => withCancel(h.gateway.current()),
      };
      await triedAgainLater(runAgentJob(counted, job('step', h.ref, { step: 1 })));
      expect(() => fileIn(h, 'written.txt')).toThrow(/ENOENT/);
      // Only the step's start read the run.
      expect(reads).toBe(1);
    } finally {
      await h.close();
    }
  });

  it('asked for during the model call on a replica that holds no copy of the run: no read is made for it, and the calls run', async () => {
    const h = await parkedRun(asksForBash, [writes, answers]);
    try {
      await runAgentJob(h.deps, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
      // A read of its own would find the cancel; the next step's start does.
      const deps: AgentDependencies = { ...cancelledFrom(h, 2), getRunHeld: () => undefined };
      await runAgentJob(deps, job('step', h.ref, { step: 1 }));
      expect(fileIn(h, 'written.txt')).toBe('hi');
      expect(h.enqueued).toEqual(['step 1', 'step 2']);
      await triedAgainLater(runAgentJob(deps, job('step', h.ref, { step: 2 })));
    } finally {
      await h.close();
    }
  });

  // The controller ended the run Cancelled while the model answered: its stop deleted the state
  // and could not remove this running job. Read as "not cancelled", the calls ran (a save before
  // a write_file brought the state back) on a run already ended.
  const ended = (run: CodingRun): Record<string, CodingRun> => ({
    'ended Cancelled': { ...run, status: { ...run.status, phase: 'Cancelled' } },
    'being deleted': { ...run, metadata: { ...run.metadata, deletionTimestamp: new Date().toISOString() } },
    'replaced by another run of its name': { ...run, metadata: { ...run.metadata, uid: 'another-uid' } },
  });
  it.each(['ended Cancelled', 'being deleted', 'replaced by another run of its name'])(
    'ended during the model call, the held copy showing the run %s: the calls do not run and the state is let go',
    async (how) => {
      const h = await parkedRun(asksForBash, [writes, answers]);
      try {
        await runAgentJob(h.deps, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
        const deps: AgentDependencies = { ...h.deps, getRunHeld: () => ended(h.gateway.current()!)[how] };
        await runAgentJob(deps, job('step', h.ref, { step: 1 }));
        expect(() => fileIn(h, 'written.txt')).toThrow(/ENOENT/);
        expect(await h.states.load(h.ref)).toBeUndefined();
        expect(h.enqueued).toEqual(['step 1']);
      } finally {
        await h.close();
      }
    },
  );

  it('ended during the model call, read again where no copy is held (getRunHeld absent): the calls do not run and the state is let go', async () => {
    const h = await parkedRun(asksForBash, [writes, answers]);
    try {
      await runAgentJob(h.deps, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
      let reads = 0;
      const read = async (namespace: string, name: string) => {
        const run = await h.gateway.getRun(namespace, name);
        reads += 1;
        return run && reads >= 2 ? ended(run)['ended Cancelled'] : run;
      };
      await runAgentJob({ ...h.deps, getRun: read, getRunFresh: read }, job('step', h.ref, { step: 1 }));
      expect(() => fileIn(h, 'written.txt')).toThrow(/ENOENT/);
      expect(await h.states.load(h.ref)).toBeUndefined();
      expect(h.enqueued).toEqual(['step 1']);
    } finally {
      await h.close();
    }
  });

  it("asked for during the model call, the answer's save failing: the answer's tokens are kept for the retry, which asks again", async () => {
    const h = await parkedRun(asksForBash, [writes, answers]);
    try {
      await runAgentJob(h.deps, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
      const before = (await h.states.load(h.ref))!;
      // The save of the answer as the step in flight fails (Redis restarting); the saves after it work.
      const states = Object.create(h.states) as typeof h.states;
      let failed = false;
      states.save = async (state) => {
        if (state.inFlight && !failed) {
          failed = true;
          throw new Error('Connection is closed.');
        }
        return h.states.save(state);
      };
      await expect(runAgentJob({ ...cancelledFrom(h, 2), states }, job('step', h.ref, { step: 1 }))).rejects.toThrow(
        'Connection is closed.',
      );
      const after = (await h.states.load(h.ref))!;
      expect(after.inFlight).toBeUndefined();
      expect(after.usage.inputTokens).toBe(before.usage.inputTokens + usage.inputTokens);
      expect(after.discardedModelCalls).toBe((before.discardedModelCalls ?? 0) + 1);
    } finally {
      await h.close();
    }
  });

  it('finalize does not verify (spec.verify.command is the model’s code) nor end the run, and is tried again: a cancel withdrawn lets it finish', async () => {
    const h = await parkedRun(asksForBash, [answers], { verify: { command: 'echo checked >> verified.txt' } } as Partial<
      CodingRun['spec']
    >);
    try {
      await runAgentJob(h.deps, job('resume', h.ref, { approval: { id: h.pending.id, decision: 'deny', reason: 'no' } }));
      // The model writes its final answer (no tool calls) while the cancel is asked for.
      await runAgentJob(h.deps, job('step', h.ref, { step: 1 }));
      expect(h.enqueued).toEqual(['step 1', 'finalize']);
      await triedAgainLater(runAgentJob(cancelledFrom(h), job('finalize', h.ref)));
      expect(() => fileIn(h, 'verified.txt')).toThrow(/ENOENT/);
      expect(h.gateway.current()!.status!.phase).toBe('Running');
      expect((await h.states.load(h.ref))!.stage).toBe('finalizing');
      // The cancel withdrawn: the job's next try verifies and ends the run.
      await runAgentJob(h.deps, job('finalize', h.ref));
      expect(fileIn(h, 'verified.txt')).toBe('checked\n');
      expect(h.gateway.current()!.status!.phase).toBe('Succeeded');
    } finally {
      await h.close();
    }
  });
});
