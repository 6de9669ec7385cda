// Table test of the agent's step/resume state machine: from a run's state in Redis and a
// job, to the state the job leaves, the job it enqueues next, the run's status and Events,
// and what the tools did to the workspace. The jobs run as the worker runs them
// (runAgentJob, failures mapped in its one place) on real parts: the bundled toolbox in a
// local sandbox (hence this tier), the scripted model, the in-memory API server of
// `run --local` (MemoryKubeGateway, with its conflicts and JSON Patch tests) and a real
// redis-server. Only the queue is a recorder: which job comes next is what is asserted.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CoreV1Event } from '@kubernetes/client-node';
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { FAILURE_MESSAGES, type CodingRun, type Phase } from '../../operator/src/api/index.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import { runEvidence } from '../../operator/src/evals/run-evidence.ts';
import { readTranscript } from '../../operator/src/record/transcript-chunks.ts';
import { MAX_RECORDED_APPROVALS, cutKey } from '../../operator/src/record/transcript-entry.ts';
import { diffSha } from '../../operator/src/reconcile/diff-config-map.ts';
import { diffConfigMapName, transcriptConfigMapName } from '../../operator/src/reconcile/names.ts';
import type { ApprovalAnswer } from '../../operator/src/reconcile/run-agent.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from '../../operator/src/providers/calling-policy.ts';
import { createLanguageModel } from '../../operator/src/providers/create-language-model.ts';
import { withCallingPolicy } from '../../operator/src/providers/with-calling-policy.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import type { ScriptedTurn } from '../../operator/src/providers/scripted/model-script-schema.ts';
import { createLocalSandbox, type LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import type { AgentDependencies, RunRef } from '../../operator/src/workers/agent-dependencies.ts';
import { failRun } from '../../operator/src/workers/fail-run.ts';
import { createModelFactory } from '../../operator/src/workers/model-factory.ts';
import { runAgentJob, type AgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { RunStateStore, type RunStage, type RunState } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { MAX_EARLIER_ENTRIES, TrailingWrites } from '../../operator/src/workers/trailing-record.ts';
import { MAX_TOOL_CALLS_PER_STEP } from '../../operator/src/workers/tool-execution.ts';
import { MAX_TOOL_CALL_ID_CHARS, usableToolCallId } from '../../operator/src/workers/usable-tool-call-ids.ts';
import { redisLandedMarks } from '../../operator/src/workers/trailing-marks.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';
import { estimateTextTokens } from '../../operator/src/agent/estimate-tokens.ts';
import { generatingModel } from '../support/generating-model.ts';

const server = redisServerForSuite();
const scratch = mkdtempSync(path.join(tmpdir(), 'chamvi-step-machine-'));
let rows = 0;

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, encoding: 'utf8' });

interface Harness {
  deps: AgentDependencies;
  ref: RunRef;
  gateway: MemoryKubeGateway;
  states: RunStateStore;
  stateKey: string;
  workspace: string;
  /** Jobs handed on, in order: "step N" (N steps completed) or "finalize". */
  enqueued: string[];
  /** Reasons of the Events recorded on the run and keys of its transcript entries, in order. */
  events: string[];
  /** Before each job: with 'replicas', the last replica's writes are done and the next job runs on another. */
  beforeJob(): Promise<void>;
  run(): CodingRun;
  close(): Promise<void>;
}

interface Setup {
  turns: ScriptedTurn[];
  approvalTools?: string[];
  maxSteps?: number;
  contextWindow?: number;
  /**
   * A running step's record trails its hand-over (trailing-record.ts): 'kept', the writes go
   * out from this process; 'replicas', each job runs on another replica, which finds the last
   * one's writes marked landed in Redis; 'lost', every process dies right after its save,
   * before they go out.
   */
  trailing?: 'kept' | 'replicas' | 'lost';
  /** spec.budget.timeout; none by default. */
  timeout?: string;
  /** spec.budget.maxTokens; none by default. */
  maxTokens?: number;
  /** spec.publish, with (approval.publish) or without a human's approval first. */
  publish?: 'approved' | 'direct';
  /** spec.model names an openai-compatible endpoint at this address, not the script (overHttp answers for it). */
  endpoint?: string;
}

/** A process that dies right after each step's save: its trailing writes never go out. */
class DyingProcess extends TrailingWrites {
  override start(): void {}
}

async function harness(setup: Setup): Promise<Harness> {
  rows += 1;
  const uid = `uid-${rows}`;
  const ref = { uid, namespace: 'agents', name: `run-${rows}` };
  const base = path.join(scratch, `row-${rows}`);
  const workspace = path.join(base, 'workspace');
  const home = path.join(base, 'home');
  execFileSync('mkdir', ['-p', workspace, home]);
  git(base, 'init', '-q', '-b', 'main', workspace);
  execFileSync('sh', ['-c', 'echo hello > README.md'], { cwd: workspace });
  git(workspace, 'add', '.');
  git(workspace, 'commit', '-qm', 'init');
  const run: CodingRun = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { ...ref, generation: 1, resourceVersion: '1' },
    spec: {
      task: 'Say hi.',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: {
        ...(setup.endpoint
          ? { provider: 'openai-compatible', name: 'fake-coder', baseURL: setup.endpoint, apiKeySecretRef: { name: 'llm' } }
          : { provider: 'scripted', scriptRef: { name: 'script', key: 'script.json' } }),
        ...(setup.contextWindow ? { contextWindow: setup.contextWindow } : {}),
      },
      approval: { tools: setup.approvalTools ?? [], ...(setup.publish === 'approved' ? { publish: true } : {}) },
      ...(setup.publish ? { publish: { credentialsSecretRef: { name: 'push-token' }, pullRequest: {} } } : {}),
      budget: {
        maxSteps: setup.maxSteps ?? 20,
        ...(setup.timeout ? { timeout: setup.timeout } : {}),
        ...(setup.maxTokens ? { maxTokens: setup.maxTokens } : {}),
      },
    } as CodingRun['spec'],
    status: { phase: 'Running', startTime: new Date().toISOString(), message: 'The agent is working.' },
  };
  const events: string[] = [];
  const gateway = new MemoryKubeGateway(
    run,
    {
      configMaps: new Map([['script', { data: { 'script.json': JSON.stringify({ turns: setup.turns }) }, binaryData: {} }]]),
      secrets: new Map(),
    },
    (event: CoreV1Event) => events.push(event.reason ?? ''),
  );
  const logger = {
    info() {},
    warn() {},
    error() {},
    child() {
      return logger;
    },
  };
  const prefix = `machine-${rows}`;
  const seal = RunStateSeal.generated();
  const states = new RunStateStore(server.redis, prefix, seal);
  const marks = redisLandedMarks(server.redis, prefix, seal);
  const sandbox: LocalSandbox = await createLocalSandbox({ mode: 'serve', workspaceDir: workspace, homeDir: home });
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
    // The transcript's entries go into the same story as the Events, by key, in the order written.
    transcript: memoryTranscriptWriter(gateway, (entry) => events.push(entry.key)),
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    getRun: (namespace, name) => gateway.getRun(namespace, name),
    ...(setup.trailing ? { trailing: setup.trailing === 'lost' ? new DyingProcess(marks) : new TrailingWrites(marks) } : {}),
    clonePolicy: { allowRepo: [], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 10_000 },
    logger,
    now: () => new Date(),
  };
  // The state the prepare job leaves: the loop about to take its first step.
  await states.create(startingState(ref, Date.now()));
  return {
    deps,
    ref,
    gateway,
    states,
    stateKey: `${prefix}:run:${uid}`,
    workspace,
    enqueued,
    events,
    async beforeJob() {
      if (setup.trailing !== 'replicas') return;
      await deps.trailing?.drain();
      deps.trailing = new TrailingWrites(marks);
    },
    run: () => gateway.current()!,
    close: () => sandbox.close(),
  };
}

const job = (name: AgentJob['name'], ref: RunRef, extra: Partial<AgentJob['data']> = {}): AgentJob => ({
  name,
  data: { ...ref, ...extra },
  attempt: 1,
  attempts: 10,
});
const step = (completed: number) => (h: Harness) => job('step', h.ref, { step: completed });
const finalize = () => (h: Harness) => job('finalize', h.ref);
const resume = (answer: (h: Harness) => ApprovalAnswer) => (h: Harness) => job('resume', h.ref, { approval: answer(h) });
const pendingId = (h: Harness) => h.run().status!.pendingApproval!.id;
const approveAsShown = resume((h) => ({ id: pendingId(h), decision: 'approve', sha256: h.run().status!.pendingApproval!.inputSha256 }));
const approveOther = resume((h) => ({ id: pendingId(h), decision: 'approve', sha256: '0'.repeat(64) }));
const deny = resume((h) => ({ id: pendingId(h), decision: 'deny', reason: 'not today' }));

const bash = (command: string) => ({ toolName: 'bash', input: { command } });
const usage = { inputTokens: 10, outputTokens: 2 };
const writesHi: ScriptedTurn = { toolCalls: [bash('echo hi >> hi.txt')], usage };
const answers: ScriptedTurn = { text: 'done', usage };

interface Row {
  name: string;
  setup: Setup;
  /** Changes made before the jobs run (a crash, a lost state, a run ended elsewhere). */
  given?: (h: Harness) => Promise<void>;
  jobs: Array<(h: Harness) => AgentJob | Promise<AgentJob>>;
  expected: {
    /** The stage of the state left in Redis, or 'none' when the run was forgotten. */
    stage: RunStage | 'none';
    step?: number;
    enqueued: string[];
    phase: Phase;
    reason?: string;
    message?: RegExp;
    events: string[];
    /** hi.txt in the workspace: its content, or null when absent. */
    hi: string | null;
    steps?: number;
    toolCalls?: number;
  };
}

const table: Row[] = [
  {
    name: 'a tool call: the step runs it, counts it, and enqueues the next step',
    setup: { turns: [writesHi, answers] },
    jobs: [step(0)],
    expected: {
      stage: 'stepping',
      step: 1,
      enqueued: ['step 1'],
      phase: 'Running',
      events: ['s000001'],
      hi: 'hi\n',
      steps: 1,
      toolCalls: 1,
    },
  },
  {
    // Node's timers wait at most 24.8 days (596 h): a longer deadline aborted the model call
    // after 1 ms (a real provider's request: DeadlineExceeded), and past 1193 h the step threw
    // before the call (AgentFailed after ten tries). The scripted model answers within that 1 ms,
    // so the row takes the second.
    name: 'a budget.timeout longer than a timer can wait (700h; a timer waits at most about 596h): the step runs its call like any other',
    setup: { turns: [writesHi, answers], timeout: '700h' },
    jobs: [step(0)],
    expected: {
      stage: 'stepping',
      step: 1,
      enqueued: ['step 1'],
      phase: 'Running',
      events: ['s000001'],
      hi: 'hi\n',
      steps: 1,
      toolCalls: 1,
    },
  },
  {
    // No status write of its own: finalize's terminal write carries the step (end-step.ts), so
    // status still shows the steps before it (none here) until then.
    name: 'an answer without tool calls: finalize is next, and carries its progress',
    setup: { turns: [answers] },
    jobs: [step(0)],
    expected: {
      stage: 'finalizing',
      step: 1,
      enqueued: ['finalize'],
      phase: 'Running',
      events: ['s000001'],
      hi: null,
    },
  },
  {
    name: 'finalize after the answer: Succeeded with the change counted, the state dropped',
    setup: { turns: [writesHi, answers] },
    jobs: [step(0), step(1), finalize()],
    expected: {
      stage: 'none',
      enqueued: ['step 1', 'finalize'],
      phase: 'Succeeded',
      reason: 'Completed',
      message: /Finished in 2 step\(s\): 1 file\(s\) changed/,
      events: ['s000001', 's000002', 'Completed'],
      hi: 'hi\n',
      steps: 2,
    },
  },
  // A running step's record trails its hand-over (trailing-record.ts); whichever process owes
  // it, the record comes out whole and each entry once.
  ...(
    [
      ['kept', 'each step lands the one before before its own, and the record is whole'],
      ['replicas', 'each job on another replica: the mark in Redis says they landed, nothing is sent twice'],
      ['lost', 'each process dead before they went out: the next job sends each again'],
    ] as const
  ).map(([trailing, what]): Row => ({
    name: `records trailing the hand-over, ${what}`,
    setup: { turns: [writesHi, writesHi, answers], trailing },
    jobs: [step(0), step(1), step(2), finalize()],
    expected: {
      stage: 'none',
      enqueued: ['step 1', 'step 2', 'finalize'],
      phase: 'Succeeded',
      reason: 'Completed',
      events: ['s000001', 's000002', 's000003', 'Completed'],
      hi: 'hi\nhi\n',
      steps: 3,
    },
  })),
  {
    name: 'a record lost after the hand-over, then the deadline passed: the early stop sends it before finalize',
    setup: { turns: [writesHi, writesHi, answers], trailing: 'lost' },
    jobs: [
      step(0),
      async (h) => {
        // Step 1's record did not go out; by step 2's job the run's time is up.
        const state = (await h.states.load(h.ref))!;
        state.startedAt = Date.now() - 24 * 3600_000;
        await h.states.save(state);
        return step(1)(h);
      },
      finalize(),
    ],
    expected: {
      stage: 'none',
      enqueued: ['step 1', 'finalize'],
      phase: 'Failed',
      reason: 'DeadlineExceeded',
      events: ['s000001', 'DeadlineExceeded'],
      hi: 'hi\n',
      steps: 1,
    },
  },
  {
    name: 'a call that needs approval parks the run: nothing runs, no job is enqueued',
    setup: { turns: [writesHi, answers], approvalTools: ['bash'] },
    jobs: [step(0)],
    expected: {
      stage: 'waiting',
      step: 1,
      enqueued: [],
      phase: 'WaitingForApproval',
      message: /kubectl codingrun approve/,
      events: ['s000001', 'AwaitingApproval'],
      hi: null,
    },
  },
  {
    name: "an approval naming the input's sha256 runs the call and the loop goes on",
    setup: { turns: [writesHi, answers], approvalTools: ['bash'] },
    jobs: [step(0), approveAsShown],
    expected: {
      stage: 'stepping',
      step: 1,
      enqueued: ['step 1'],
      phase: 'Running',
      events: ['s000001', 'AwaitingApproval', 'Approved', 's000001-c000001'],
      hi: 'hi\n',
      toolCalls: 1,
    },
  },
  {
    name: 'an approval naming another sha256 is refused: nothing runs, the call still waits (Security #11.5)',
    setup: { turns: [writesHi, answers], approvalTools: ['bash'] },
    jobs: [step(0), approveOther],
    expected: {
      stage: 'waiting',
      step: 1,
      enqueued: [],
      phase: 'WaitingForApproval',
      message: /^Refused the approval of bash call/,
      events: ['s000001', 'AwaitingApproval', 'ApprovalRefused'],
      hi: null,
    },
  },
  {
    name: 'a denial: the call does not run and the loop goes on',
    setup: { turns: [writesHi, answers], approvalTools: ['bash'] },
    jobs: [step(0), deny],
    expected: {
      stage: 'stepping',
      step: 1,
      enqueued: ['step 1'],
      phase: 'Running',
      events: ['s000001', 'AwaitingApproval', 'Denied', 's000001-c000001'],
      hi: null,
      toolCalls: 1,
    },
  },
  {
    name: 'the step budget spent: finalize is next, with BudgetExceeded kept for it',
    setup: { turns: [writesHi, answers], maxSteps: 1 },
    jobs: [step(0), finalize()],
    expected: {
      stage: 'none',
      enqueued: ['finalize'],
      phase: 'Failed',
      reason: 'BudgetExceeded',
      events: ['s000001', 'BudgetExceeded'],
      hi: 'hi\n',
      steps: 1,
    },
  },
  {
    name: 'a step redone after its work was saved hands on: the model is not asked again, the call not run twice',
    setup: { turns: [writesHi, answers] },
    jobs: [step(0), step(0)],
    expected: {
      stage: 'stepping',
      step: 1,
      enqueued: ['step 1', 'step 1'],
      phase: 'Running',
      events: ['s000001'],
      hi: 'hi\n',
      toolCalls: 1,
    },
  },
  {
    name: 'a step cut off after its first call: the redone job runs only the call not finished',
    setup: { turns: [answers] },
    given: async (h) => {
      const state = (await h.states.load(h.ref))!;
      const calls = [
        { toolCallId: 'c1', toolName: 'bash', input: { command: 'echo one >> hi.txt' } },
        { toolCallId: 'c2', toolName: 'bash', input: { command: 'echo two >> hi.txt' } },
      ];
      state.step = 1;
      state.messages.push({ role: 'assistant', content: calls.map((call) => ({ type: 'tool-call' as const, ...call })) });
      // c1 ran (its result kept) and the worker died before c2.
      state.inFlight = {
        calls,
        results: [{ toolCallId: 'c1', toolName: 'bash', ok: true, text: 'exit 0' }],
        earlier: [],
        hadToolCalls: true,
        toolNames: ['bash', 'bash'],
        text: '',
        resumed: false,
      };
      await h.states.save(state);
    },
    jobs: [step(0)],
    expected: { stage: 'stepping', step: 1, enqueued: ['step 1'], phase: 'Running', events: ['s000001'], hi: 'two\n', toolCalls: 2 },
  },
  {
    name: 'no state in Redis: the run fails StateLost with the one StateLost message',
    setup: { turns: [writesHi] },
    given: async (h) => void (await server.redis.del(h.stateKey)),
    jobs: [step(0)],
    expected: {
      stage: 'none',
      enqueued: [],
      phase: 'Failed',
      reason: 'StateLost',
      message: new RegExp(`^${FAILURE_MESSAGES.stateGone.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`),
      events: ['s000000-end', 'StateLost'],
      hi: null,
    },
  },
  {
    name: 'a state not written by the operator: StateLost, nothing in it acted on (Security #11.1)',
    setup: { turns: [writesHi] },
    given: async (h) => void (await server.redis.set(h.stateKey, JSON.stringify({ stage: 'stepping', step: 0 }))),
    jobs: [step(0)],
    expected: {
      stage: 'none',
      enqueued: [],
      phase: 'Failed',
      reason: 'StateLost',
      message: /failed validation/,
      events: ['s000000-end', 'StateLost'],
      hi: null,
    },
  },
  {
    name: 'a run ended meanwhile (the controller failed it): the job forgets it and writes nothing',
    setup: { turns: [writesHi] },
    given: async (h) => {
      const run = h.run();
      await h.gateway.replaceRunStatus(run, { ...run.status, phase: 'Failed', reason: 'SandboxLost', message: 'gone' });
    },
    jobs: [step(0)],
    expected: { stage: 'none', enqueued: [], phase: 'Failed', reason: 'SandboxLost', message: /^gone$/, events: [], hi: null },
  },
];

describe('the step/resume state machine', () => {
  it.each(table.map((row) => [row.name, row] as const))('%s', async (_name, row) => {
    const h = await harness(row.setup);
    try {
      await row.given?.(h);
      for (const next of row.jobs) {
        await h.beforeJob();
        await runAgentJob(h.deps, await next(h));
      }
      const { expected } = row;
      const text = await h.states.loadText(h.ref.uid);
      if (expected.stage === 'none') expect(text).toBeUndefined();
      else {
        const state = (await h.states.load(h.ref))!;
        expect(state.stage).toBe(expected.stage);
        if (expected.step !== undefined) expect(state.step).toBe(expected.step);
        if (expected.toolCalls !== undefined) expect(state.toolCalls).toBe(expected.toolCalls);
        expect(state.inFlight).toBeUndefined();
      }
      expect(h.enqueued).toEqual(expected.enqueued);
      const status = h.run().status!;
      expect(status.phase).toBe(expected.phase);
      if (expected.reason) expect(status.reason).toBe(expected.reason);
      if (expected.message) expect(status.message).toMatch(expected.message);
      if (expected.steps !== undefined) expect(status.steps).toBe(expected.steps);
      expect(status.pendingApproval !== undefined).toBe(expected.phase === 'WaitingForApproval');
      expect(h.events).toEqual(expected.events);
      const hi = path.join(h.workspace, 'hi.txt');
      expect(existsSync(hi) ? readFileSync(hi, 'utf8') : null).toBe(expected.hi);
    } finally {
      await h.close();
    }
  });
});

describe("a step's saves (#17.5): a call that may change something is saved as it ends, a read rides on the next save", () => {
  it("saves before the calls, after the write, with the diff's sha256 once they ran, and at the end: not after either read; a redo runs only the reads again", async () => {
    const read = { toolName: 'read_file', input: { path: 'README.md' } };
    const search = { toolName: 'grep', input: { pattern: 'hello' } };
    const h = await harness({ turns: [{ toolCalls: [read, bash('echo hi >> hi.txt'), search], usage }, answers] });
    try {
      // What each save of the state held of the step in flight: its results so far, or 'end' once it was done.
      const saves: Array<string[] | 'end'> = [];
      const pending: Array<string | undefined> = [];
      const save = h.states.save.bind(h.states);
      vi.spyOn(h.states, 'save').mockImplementation(async (state) => {
        saves.push(state.inFlight ? state.inFlight.results.map((result) => result.toolName) : 'end');
        pending.push(state.pendingDiffSha256);
        await save(state);
      });
      await runAgentJob(h.deps, step(0)(h));
      // Calls on different files run side by side (tool-execution.ts), so the reads may end before or after the write.
      expect(saves).toHaveLength(4);
      expect(saves[0]).toEqual([]);
      expect(saves[1]).toContain('bash');
      // The write changed the diff: its sha256 is saved before the snapshot is stored (diff-snapshot.ts).
      expect([...saves[2]!].sort()).toEqual(['bash', 'grep', 'read_file']);
      expect(saves[3]).toBe('end');
      const stored = (await h.states.load(h.ref))!.diffSnapshot!;
      expect(pending).toEqual([undefined, undefined, stored.sha256, undefined]);

      // The worker died after the write was saved and before the step ended: the state is the
      // second save's. The redone step runs the grep (never saved) and not the write again.
      const state = (await h.states.load(h.ref))!;
      state.step = 1;
      state.stage = 'stepping';
      delete state.trailing;
      state.inFlight = {
        calls: [
          { toolCallId: 'r1', ...read },
          { toolCallId: 'w1', ...bash('echo hi >> hi.txt') },
          { toolCallId: 'g1', ...search },
        ],
        results: [
          { toolCallId: 'r1', toolName: 'read_file', ok: true, text: 'hello' },
          { toolCallId: 'w1', toolName: 'bash', ok: true, text: 'exit 0' },
        ],
        earlier: [],
        hadToolCalls: true,
        toolNames: ['read_file', 'bash', 'grep'],
        text: '',
        resumed: false,
      };
      await save(state);
      saves.length = 0;
      await runAgentJob(h.deps, step(0)(h));
      expect(saves).toEqual(['end']);
      expect(readFileSync(path.join(h.workspace, 'hi.txt'), 'utf8')).toBe('hi\n');
      const after = (await h.states.load(h.ref))!;
      const toolMessage = after.messages.at(-1)!;
      expect(toolMessage.role).toBe('tool');
      expect((toolMessage.content as Array<{ toolCallId: string }>).map((part) => part.toolCallId)).toEqual(['r1', 'w1', 'g1']);
    } finally {
      await h.close();
    }
  });
});

// After a step's calls that changed the diff, it is stored in the run's diff ConfigMap
// (diff-snapshot.ts), and an ending that finds the sandbox gone keeps it only when its sha256
// is one the state records. Before, the state recorded it in the save after the write, so a
// worker that died in between left a diff the ending refused as changed: the work was lost.
describe("the diff snapshot's sha256 is saved before its write", () => {
  /** Each save: the results of the step in flight ('end' once it was done), and the diff snapshot's sha256s. */
  const watchSaves = (h: Harness) => {
    const saves: Array<{ results: string[] | 'end'; pending?: string; stored?: string }> = [];
    const save = h.states.save.bind(h.states);
    const spy = vi.spyOn(h.states, 'save').mockImplementation(async (state) => {
      saves.push({
        results: state.inFlight ? state.inFlight.results.map((result) => result.toolName) : 'end',
        ...(state.pendingDiffSha256 ? { pending: state.pendingDiffSha256 } : {}),
        ...(state.diffSnapshot?.sha256 ? { stored: state.diffSnapshot.sha256 } : {}),
      });
      await save(state);
    });
    return { saves, spy, save };
  };

  it('a step of one call saves no more than before: the save of its result waits for the diff and carries its sha256', async () => {
    const h = await harness({ turns: [writesHi, answers] });
    try {
      const { saves } = watchSaves(h);
      await runAgentJob(h.deps, step(0)(h));
      const stored = (await h.states.load(h.ref))!.diffSnapshot!;
      expect(stored.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(saves).toEqual([{ results: [] }, { results: ['bash'], pending: stored.sha256 }, { results: 'end', stored: stored.sha256 }]);
    } finally {
      await h.close();
    }
  });

  it('a worker that dies after the write, before the save that records it as stored: an ending without the sandbox keeps that diff', async () => {
    const h = await harness({ turns: [writesHi, answers] });
    try {
      let written: string | undefined;
      const write = h.deps.resources.writeDiff.bind(h.deps.resources);
      vi.spyOn(h.deps.resources, 'writeDiff').mockImplementation(async (run, diff, options) => {
        const stored = await write(run, diff, options);
        written = diff;
        return stored;
      });
      const { spy, save } = watchSaves(h);
      spy.mockImplementation(async (state) => {
        if (written !== undefined) throw new Error('the worker died here');
        await save(state);
      });
      await expect(runAgentJob(h.deps, step(0)(h))).rejects.toThrow('the worker died here');
      expect(written).toContain('+hi');
      const left = (await h.states.load(h.ref))!;

      // Its pod is lost before a retry: the run ends without its sandbox, from the state the worker left.
      await failRun(h.deps, h.ref, 'SandboxLost', 'The sandbox pod was lost.');
      const status = h.run().status!;
      expect(status.phase).toBe('Failed');
      expect(status.message).toBe('The sandbox pod was lost.');
      expect(status.result).toMatchObject({ diffSource: 'snapshot', diffSha256: diffSha(written!), filesChanged: 1, insertions: 1 });
      expect(status.result!.diff).toBe(written);
      // What the worker left: the step in flight, the diff's sha256 pending, none recorded as stored.
      expect(left.inFlight?.results.map((result) => result.toolName)).toEqual(['bash']);
      expect(left.diffSnapshot).toBeUndefined();
      expect(left.pendingDiffSha256).toBe(diffSha(written!));
    } finally {
      await h.close();
    }
  });

  it('a write that landed but failed leaves its sha256 pending: the next step writes again even when the agent undid the change', async () => {
    const h = await harness({ turns: [writesHi, { toolCalls: [bash('rm hi.txt')], usage }, answers] });
    try {
      const write = h.deps.resources.writeDiff.bind(h.deps.resources);
      const spy = vi.spyOn(h.deps.resources, 'writeDiff').mockImplementationOnce(async (run, diff, options) => {
        await write(run, diff, options);
        throw new Error('the answer was lost on the way back');
      });
      await runAgentJob(h.deps, step(0)(h));
      expect((await h.states.load(h.ref))!.pendingDiffSha256).toMatch(/^[0-9a-f]{64}$/);
      // The agent removes the file: the diff is empty again, as before the first step.
      await runAgentJob(h.deps, step(1)(h));
      expect(spy).toHaveBeenCalledTimes(2);
      const left = (await h.states.load(h.ref))!;
      expect(left.pendingDiffSha256).toBeUndefined();

      // The pod is lost: the ending keeps what the ConfigMap holds now, the undone change, not the stale diff.
      await failRun(h.deps, h.ref, 'SandboxLost', 'The sandbox pod was lost.');
      const result = h.run().status!.result!;
      expect(result.diff).not.toContain('+hi');
      expect(result.filesChanged).toBe(0);
    } finally {
      await h.close();
    }
  });
});

// A status write that fails (8 conflicts, or the API server down) after the state moved on
// lost what it carried: the job's retry found the work saved and only handed the run on.
// Each such write now lands before the save, so the retry redoes it; a wait for a human is
// saved first (its answer's job must find it waiting), and the retry shows it whole.
describe('a write or hand-over that fails once: the retry does it, nothing is done twice', () => {
  const failNextStatusWrite = (h: Harness) =>
    vi.spyOn(h.gateway, 'replaceRunStatus').mockRejectedValueOnce(Object.assign(new Error('etcdserver: leader changed'), { code: 500 }));
  /** Runs a job's first try, which fails on its status write, then its second. */
  const failOnceThenRetry = async (h: Harness, next: (h: Harness) => AgentJob) => {
    const first = next(h);
    failNextStatusWrite(h);
    await expect(runAgentJob(h.deps, first)).rejects.toThrow(/leader changed/);
    await runAgentJob(h.deps, { ...first, attempt: 2 });
  };

  // Not a status write, the same shape: the stop saves 'finalizing' without counting a step,
  // and the retry took the saved stage for another job's work.
  it('a stop before the model call whose hand-over to finalize failed: the retry hands over', async () => {
    const h = await harness({ turns: [writesHi, answers] });
    try {
      const state = (await h.states.load(h.ref))!;
      state.startedAt = Date.now() - 24 * 3600_000;
      await h.states.save(state);
      const { finalize: handOver } = h.deps.queue;
      h.deps.queue.finalize = vi.fn(handOver).mockRejectedValueOnce(new Error('Connection is closed.'));
      const first = step(0)(h);
      await expect(runAgentJob(h.deps, first)).rejects.toThrow(/Connection is closed/);
      await runAgentJob(h.deps, { ...first, attempt: 2 });
      expect(h.enqueued).toEqual(['finalize']);
      expect((await h.states.load(h.ref))!.stop?.reason).toBe('DeadlineExceeded');
    } finally {
      await h.close();
    }
  });

  it.each([
    ['between steps', false, ['step 1']],
    ['with a step in flight, whose job owns it', true, []],
  ] as const)('a prepare redone after the loop started (its worker died before its end), %s', async (_when, inFlight, enqueued) => {
    const h = await harness({ turns: [writesHi, answers] });
    try {
      const state = (await h.states.load(h.ref))!;
      state.step = 1;
      if (inFlight) state.inFlight = { calls: [], results: [], earlier: [], hadToolCalls: true, toolNames: [], text: '', resumed: false };
      await h.states.save(state);
      await runAgentJob(h.deps, job('prepare', h.ref));
      expect(h.enqueued).toEqual(enqueued);
    } finally {
      await h.close();
    }
  });

  // Verify handed the run back to the model and queued step 1, and the finalize that did so
  // is run again (its worker stalled) while step 1's calls run: it leaves them to step 1's job.
  it("a finalize redone while a step is in flight: the step's calls are left to its own job", async () => {
    const h = await harness({ turns: [answers] });
    try {
      const state = (await h.states.load(h.ref))!;
      state.step = 1;
      state.inFlight = {
        calls: [{ toolCallId: 'c1', toolName: 'bash', input: { command: 'echo hi >> hi.txt' } }],
        results: [],
        earlier: [],
        hadToolCalls: true,
        toolNames: ['bash'],
        text: '',
        resumed: false,
      };
      await h.states.save(state);
      await runAgentJob(h.deps, finalize()(h));
      expect(existsSync(path.join(h.workspace, 'hi.txt'))).toBe(false);
      expect(h.enqueued).toEqual(['step 0']);
      expect((await h.states.load(h.ref))!.inFlight).toBeDefined();
    } finally {
      await h.close();
    }
  });

  it('a resumed approval: the run is Running again and status.approvals names who answered', async () => {
    const h = await harness({ turns: [writesHi, answers], approvalTools: ['bash'] });
    try {
      await runAgentJob(h.deps, step(0)(h));
      const id = pendingId(h);
      const sha256 = h.run().status!.pendingApproval!.inputSha256;
      await failOnceThenRetry(
        h,
        resume(() => ({ id, decision: 'approve', sha256, user: 'alice' })),
      );
      expect(h.run().status).toMatchObject({ phase: 'Running', approvals: [{ id, decision: 'approve', user: 'alice' }] });
      expect(h.run().status!.pendingApproval).toBeUndefined();
      expect(h.enqueued).toEqual(['step 1']);
      // The retry writes the answered call's entry again, under the same key: the transcript holds it once.
      expect(h.events).toEqual(['s000001', 'AwaitingApproval', 'Approved', 's000001-c000001', 's000001-c000001']);
      const run = h.run();
      const { entries } = readTranscript([h.gateway.configMap(run.metadata.namespace, transcriptConfigMapName(run, 0))!], run);
      expect(entries.map((entry) => entry.key)).toEqual(['s000001', 's000001-c000001']);
      expect(readFileSync(path.join(h.workspace, 'hi.txt'), 'utf8')).toBe('hi\n');
    } finally {
      await h.close();
    }
  });

  it('a resumed approval whose step waits for another: the wait is shown and status.approvals names the first answer', async () => {
    const twoWrites: ScriptedTurn = { toolCalls: [bash('echo one >> hi.txt'), bash('echo two >> hi.txt')], usage };
    const h = await harness({ turns: [twoWrites, answers], approvalTools: ['bash'] });
    try {
      await runAgentJob(h.deps, step(0)(h));
      const first = pendingId(h);
      const sha256 = h.run().status!.pendingApproval!.inputSha256;
      await failOnceThenRetry(
        h,
        resume(() => ({ id: first, decision: 'approve', sha256, user: 'alice' })),
      );
      expect(h.run().status).toMatchObject({ phase: 'WaitingForApproval', approvals: [{ id: first, decision: 'approve', user: 'alice' }] });
      expect(pendingId(h)).not.toBe(first);
      expect(readFileSync(path.join(h.workspace, 'hi.txt'), 'utf8')).toBe('one\n');
      expect(h.enqueued).toEqual([]);
    } finally {
      await h.close();
    }
  });

  it('publishing without approval: status.result holds the diff and its summary while the push is under way', async () => {
    const h = await harness({ turns: [writesHi, answers], publish: 'direct' });
    try {
      await runAgentJob(h.deps, step(0)(h));
      await runAgentJob(h.deps, step(1)(h));
      await failOnceThenRetry(h, finalize());
      expect(h.run().status).toMatchObject({ phase: 'Running', result: { summary: 'done', filesChanged: 1 } });
      expect(h.enqueued).toEqual(['step 1', 'finalize', 'publish']);
      expect((await h.states.load(h.ref))!.stage).toBe('publishing');
    } finally {
      await h.close();
    }
  });

  // Saved waiting before it is shown (an answer's resume job must find it so): the redone
  // finalize shows it, with the diff the approver reviews read back from its ConfigMap.
  it('a publish approval whose wait was not shown: the redone finalize shows it, the diff in status.result', async () => {
    const h = await harness({ turns: [writesHi, answers], publish: 'approved' });
    try {
      await runAgentJob(h.deps, step(0)(h));
      await runAgentJob(h.deps, step(1)(h));
      await failOnceThenRetry(h, finalize());
      expect(h.run().status).toMatchObject({
        phase: 'WaitingForApproval',
        pendingApproval: { id: 'publish', toolName: 'publish' },
        result: { summary: 'done', filesChanged: 1, insertions: 1, diffConfigMap: expect.any(String) },
      });
      expect(h.run().status!.result!.diff).toContain('+hi');
      expect(h.events.filter((reason) => reason === 'AwaitingApproval')).toHaveLength(1);
      const sha256 = h.run().status!.pendingApproval!.inputSha256;
      await runAgentJob(h.deps, resume(() => ({ id: 'publish', decision: 'approve', sha256 }))(h));
      expect(h.enqueued).toEqual(['step 1', 'finalize', 'publish']);
    } finally {
      await h.close();
    }
  });

  it("a redone finalize that finds the diff ConfigMap changed since fails PublishFailed, showing nothing as the run's", async () => {
    const h = await harness({ turns: [writesHi, answers], publish: 'approved' });
    try {
      await runAgentJob(h.deps, step(0)(h));
      await runAgentJob(h.deps, step(1)(h));
      const first = finalize()(h);
      failNextStatusWrite(h);
      await expect(runAgentJob(h.deps, first)).rejects.toThrow(/leader changed/);
      // Between the two tries, someone who may write ConfigMaps puts a harmless diff in.
      const run = h.run();
      const name = diffConfigMapName(run);
      const kept = h.gateway.configMap(run.metadata.namespace, name)!;
      const harmless = String(kept.data!.diff).replace('+hi', '+hello');
      h.gateway.putConfigMap({
        ...kept,
        metadata: { ...kept.metadata, namespace: run.metadata.namespace },
        data: { ...kept.data, diff: harmless },
      });
      await runAgentJob(h.deps, { ...first, attempt: 2 });
      expect(h.run().status).toMatchObject({ phase: 'Failed', reason: 'PublishFailed' });
      expect(h.run().status!.message).toContain('diff ConfigMap changed after the run ended');
      expect(h.run().status!.pendingApproval).toBeUndefined();
    } finally {
      await h.close();
    }
  });

  // Who answered is recorded as for a tool call's approval (#15.5): status.approvals, the
  // transcript and the Event. The Event said only "publishing approved", and nothing else kept the user.
  it.each([
    ['approve', 'Running while it publishes, the approval in its Event', 'publishing', 'Running', ['Approved']],
    ['deny', 'Succeeded without publishing, and the state dropped', 'none', 'Succeeded', ['PublishDenied', 'Completed']],
  ] as const)('a publish approval answered %s: %s, the user recorded', async (decision, _what, stage, phase, events) => {
    const h = await harness({ turns: [writesHi, answers], publish: 'approved' });
    try {
      await runAgentJob(h.deps, step(0)(h));
      await runAgentJob(h.deps, step(1)(h));
      await runAgentJob(h.deps, finalize()(h));
      expect(h.run().status).toMatchObject({ phase: 'WaitingForApproval', pendingApproval: { id: 'publish' } });
      const sha256 = h.run().status!.pendingApproval!.inputSha256;
      const recorded = vi.spyOn(h.deps.events, 'record');
      await failOnceThenRetry(
        h,
        resume(() => ({ id: 'publish', decision, user: 'alice', ...(decision === 'approve' ? { sha256 } : { reason: 'not now' }) })),
      );
      expect(h.run().status!.phase).toBe(phase);
      expect(h.run().status!.pendingApproval).toBeUndefined();
      // The answer's transcript entry: the first try's, written before its status write failed, then the retry's.
      expect(h.events.slice(h.events.indexOf('AwaitingApproval') + 1)).toEqual(['s000002-c000000', 's000002-c000000', ...events]);
      expect(h.enqueued).toEqual(decision === 'approve' ? ['step 1', 'finalize', 'publish'] : ['step 1', 'finalize']);
      const state = await h.states.load(h.ref);
      expect(state?.stage ?? 'none').toBe(stage);
      expect(h.run().status!.approvals).toEqual([
        expect.objectContaining({ id: 'publish', toolName: 'publish', decision, user: 'alice', answeredAt: expect.any(String) }),
      ]);
      const answeredEvent = recorded.mock.calls.map(([, event]) => event).find((event) => event.reason !== 'Completed')!;
      expect(answeredEvent.message).toBe(decision === 'approve' ? 'publishing approved by alice' : 'publishing denied by alice: not now');
      const run = h.run();
      const { entries } = readTranscript([h.gateway.configMap(run.metadata.namespace, transcriptConfigMapName(run, 0))!], run);
      expect(entries.at(-1)).toMatchObject({
        key: 's000002-c000000',
        kind: 'approval',
        approval: { id: 'publish', tool: 'publish', decision, user: 'alice' },
      });
    } finally {
      await h.close();
    }
  });

  it('a publish approval the timeout denied: status.approvals and the Event say so, naming nobody', async () => {
    const h = await harness({ turns: [writesHi, answers], publish: 'approved' });
    try {
      await runAgentJob(h.deps, step(0)(h));
      await runAgentJob(h.deps, step(1)(h));
      await runAgentJob(h.deps, finalize()(h));
      const recorded = vi.spyOn(h.deps.events, 'record');
      await runAgentJob(h.deps, resume(() => ({ id: 'publish', decision: 'deny', reason: 'approval.timeout passed', timedOut: true }))(h));
      expect(h.run().status).toMatchObject({
        phase: 'Succeeded',
        approvals: [{ id: 'publish', toolName: 'publish', decision: 'deny', timedOut: true, reason: 'approval.timeout passed' }],
      });
      expect(h.run().status!.approvals![0]!.user).toBeUndefined();
      expect(recorded.mock.calls[0]![1].message).toBe('publishing denied (timeout): approval.timeout passed');
    } finally {
      await h.close();
    }
  });

  // The approve and the timeout's deny can each load the state while it still waits: only the
  // first to claim the answer acts, or the deny ended the run Succeeded, unpublished, while the
  // approve's push was queued.
  it("a publish approval approved: the timeout's deny, which found the state still waiting, is dropped", async () => {
    const h = await harness({ turns: [writesHi, answers], publish: 'approved' });
    try {
      await runAgentJob(h.deps, step(0)(h));
      await runAgentJob(h.deps, step(1)(h));
      await runAgentJob(h.deps, finalize()(h));
      const sha256 = h.run().status!.pendingApproval!.inputSha256;
      const waiting = (await h.states.load(h.ref))!;
      await runAgentJob(h.deps, resume(() => ({ id: 'publish', decision: 'approve', sha256, user: 'alice' }))(h));
      const approved = (await h.states.load(h.ref))!;
      // The deny's job loaded the state before the approve saved it.
      await h.states.save(waiting);
      await runAgentJob(h.deps, resume(() => ({ id: 'publish', decision: 'deny', reason: 'approval.timeout passed', timedOut: true }))(h));
      expect(h.run().status!.phase).toBe('Running');
      expect(h.events).not.toContain('PublishDenied');
      expect(h.enqueued).toEqual(['step 1', 'finalize', 'publish']);
      expect(approved.stage).toBe('publishing');
    } finally {
      await h.close();
    }
  });
});

describe('records that wait behind writes on their way (#17.5): a step does not wait for them, one write carries several', () => {
  /**
   * Holds the first write that carries step `step`'s transcript entry until `release` (with an
   * error: it fails), so that record stays on its way. `appends` lists the steps each write carried.
   */
  const holdEntry = (h: Harness, step: number) => {
    const { append } = h.deps.transcript;
    const appends: number[][] = [];
    let release!: (failure?: Error) => void;
    const gate = new Promise<Error | undefined>((resolve) => (release = resolve));
    let held = false;
    h.deps.transcript = {
      append: async (run, entries) => {
        appends.push(entries.map((entry) => entry.step));
        if (entries.some((entry) => entry.step === step) && !held) {
          held = true;
          const failure = await gate;
          if (failure) throw failure;
        }
        await append(run, entries);
      },
    };
    return { release, appends };
  };

  it('hands on while the writes before are on their way; the records behind them go out as one, in order, each entry once', async () => {
    const h = await harness({ turns: [writesHi, writesHi, writesHi, answers], trailing: 'kept' });
    try {
      const { release, appends } = holdEntry(h, 1);
      await runAgentJob(h.deps, step(0)(h));
      // Steps 2 and 3 end and hand on with step 1's writes still held: neither waits for them.
      await runAgentJob(h.deps, step(1)(h));
      expect((await h.states.load(h.ref))!.trailing).toMatchObject({ step: 2, earlier: [{ key: 's000001' }] });
      await runAgentJob(h.deps, step(2)(h));
      expect(h.enqueued).toEqual(['step 1', 'step 2', 'step 3']);
      const third = (await h.states.load(h.ref))!.trailing!;
      expect(third.step).toBe(3);
      expect(third.earlier!.map((entry) => entry.key)).toEqual(['s000001', 's000002']);
      expect(h.events).toEqual([]);
      release();
      await h.deps.trailing!.drain();
      // Step 3's record took over step 2's, which was waiting: one write for both entries, once step 1's landed.
      expect(appends).toEqual([[1], [2, 3]]);
      expect(h.events).toEqual(['s000001', 's000002', 's000003']);
      expect(h.run().status!.steps).toBe(3);
      await runAgentJob(h.deps, step(3)(h));
      await runAgentJob(h.deps, finalize()(h));
      expect(h.events).toEqual(['s000001', 's000002', 's000003', 's000004', 'Completed']);
      expect(h.run().status).toMatchObject({ phase: 'Succeeded', steps: 4 });
    } finally {
      await h.close();
    }
  });

  it('writes the entries before again when their writes failed', async () => {
    const h = await harness({ turns: [writesHi, writesHi, answers], trailing: 'kept' });
    try {
      const { release, appends } = holdEntry(h, 1);
      await runAgentJob(h.deps, step(0)(h));
      await runAgentJob(h.deps, step(1)(h));
      release(new Error('API server unreachable'));
      await h.deps.trailing!.drain();
      expect(appends).toEqual([[1], [1, 2]]);
      expect(h.events).toEqual(['s000001', 's000002']);
      expect(h.run().status!.steps).toBe(2);
    } finally {
      await h.close();
    }
  });

  it('a process that died with both records on their way: the next job, on another replica, sends the entries before and its own', async () => {
    const h = await harness({ turns: [writesHi, writesHi, answers], trailing: 'kept' });
    try {
      holdEntry(h, 1);
      await runAgentJob(h.deps, step(0)(h));
      // Step 2's writes wait behind step 1's, which never end: the process is gone.
      await runAgentJob(h.deps, step(1)(h));
      h.deps.trailing = new TrailingWrites();
      expect(h.events).toEqual([]);
      await runAgentJob(h.deps, step(2)(h));
      await runAgentJob(h.deps, finalize()(h));
      expect(h.events).toEqual(['s000001', 's000002', 's000003', 'Completed']);
      expect(h.run().status).toMatchObject({ phase: 'Succeeded', steps: 3 });
    } finally {
      await h.close();
    }
  });

  // The step after a record lost on its way ends the loop as it fails: on the deadline
  // (run-agent-job.ts saves 'finalizing' for finalize) or with a failure (fail-run.ts).
  it.each(['finalize after the deadline', 'a failure'] as const)(
    'a record lost on its way, then %s: it lands before the run ends',
    async (ending) => {
      const h = await harness({ turns: [writesHi, answers], trailing: 'lost' });
      try {
        await runAgentJob(h.deps, step(0)(h));
        expect(h.events).toEqual([]);
        if (ending === 'a failure') await failRun(h.deps, h.ref, 'ModelAuthFailed', 'the key was refused');
        else {
          const state = (await h.states.load(h.ref))!;
          state.stage = 'finalizing';
          state.stop = { reason: 'DeadlineExceeded', message: 'the deadline passed' };
          await h.states.save(state);
          await runAgentJob(h.deps, finalize()(h));
        }
        expect(h.events[0]).toBe('s000001');
        expect(h.run().status).toMatchObject({ phase: 'Failed', steps: 1 });
      } finally {
        await h.close();
      }
    },
  );

  it(`waits instead when the record before already carries ${MAX_EARLIER_ENTRIES} earlier entries: the state stays bounded`, async () => {
    const turns = [...Array.from({ length: MAX_EARLIER_ENTRIES + 2 }, () => writesHi), answers];
    const h = await harness({ turns, trailing: 'kept' });
    try {
      const { release } = holdEntry(h, 1);
      for (let completed = 0; completed <= MAX_EARLIER_ENTRIES; completed += 1) await runAgentJob(h.deps, step(completed)(h));
      expect((await h.states.load(h.ref))!.trailing!.earlier).toHaveLength(MAX_EARLIER_ENTRIES);
      const next = runAgentJob(h.deps, step(MAX_EARLIER_ENTRIES + 1)(h));
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(h.enqueued).toHaveLength(MAX_EARLIER_ENTRIES + 1);
      release();
      await next;
      expect(h.enqueued).toHaveLength(MAX_EARLIER_ENTRIES + 2);
      const state = (await h.states.load(h.ref))!;
      expect(state.trailing).toMatchObject({ step: MAX_EARLIER_ENTRIES + 2 });
      expect(state.trailing!.earlier).toBeUndefined();
      await h.deps.trailing!.drain();
      expect(h.events).toEqual(Array.from({ length: MAX_EARLIER_ENTRIES + 2 }, (_, index) => `s00000${index + 1}`));
    } finally {
      await h.close();
    }
  });
});

describe('a step of reads only (#17.5): saved once, at its end; a redo asks the model again', () => {
  it('saves only at the end; a worker that dies before that save redoes the step from the model call', async () => {
    const read = { toolName: 'read_file', input: { path: 'README.md' } };
    const search = { toolName: 'grep', input: { pattern: 'hello' } };
    const h = await harness({ turns: [{ toolCalls: [read, search], usage }, answers] });
    try {
      const saves: Array<string[] | 'end' | 'spent'> = [];
      const save = h.states.save.bind(h.states);
      const spy = vi.spyOn(h.states, 'save');
      const saved = (state: RunState) =>
        state.inFlight ? state.inFlight.results.map((result) => result.toolName) : state.step === 0 ? 'spent' : 'end';
      // The first try fails at its one save, after the model answered and both reads ran.
      spy.mockImplementationOnce(async (state) => {
        saves.push(saved(state));
        throw new Error('the worker died here');
      });
      spy.mockImplementation(async (state) => {
        saves.push(saved(state));
        await save(state);
      });
      await expect(runAgentJob(h.deps, step(0)(h))).rejects.toThrow('the worker died here');
      // Then only what it spent is saved (spent-on-unsaved-step.ts).
      expect(saves).toEqual(['end', 'spent']);
      // Nothing else of the step reached Redis: the state is the one before it.
      const before = (await h.states.load(h.ref))!;
      expect(before.step).toBe(0);
      expect(before.inFlight).toBeUndefined();
      expect(before.messages).toHaveLength(1);
      expect(before.usage.totalTokens).toBe(12);

      await runAgentJob(h.deps, step(0)(h));
      expect(saves).toEqual(['end', 'spent', 'end']);
      const after = (await h.states.load(h.ref))!;
      expect(after.step).toBe(1);
      // Both answers are counted: the model was asked twice.
      expect(after.usage.totalTokens).toBe(24);
      expect(after.toolCalls).toBe(2);
      const toolMessage = after.messages.at(-1)!;
      expect(toolMessage.role).toBe('tool');
      expect((toolMessage.content as Array<{ toolName: string }>).map((part) => part.toolName).sort()).toEqual(['grep', 'read_file']);
      // The model was asked twice: the price of not saving before reads.
      expect((await h.deps.metrics.steps.get()).values.reduce((sum, each) => sum + each.value, 0)).toBe(2);
      expect(h.enqueued).toEqual(['step 1']);
    } finally {
      await h.close();
    }
  });
});

// A model can make its own reads fail: a background job it started kills the toolbox, whose
// calls then throw TRANSPORT. Each failed try of a step of reads only is retried from the model
// call (nothing of the step was saved); every answer is paid for, so every one counts.
describe('a step of reads only whose calls fail: every try asks the model, and every answer counts', () => {
  const read = { toolName: 'read_file', input: { path: 'README.md' } };
  const costly = { inputTokens: 90, outputTokens: 10 };
  /** The first `failures` tool calls throw as a dead toolbox does; the rest reach the real sandbox. Returns what heals it. */
  const failFirstCalls = (h: Harness, failures: number) => {
    const pool = h.deps.sandboxes;
    h.deps.sandboxes = new SandboxPool((run) => {
      const real = pool.for(run);
      return {
        call: async (request, options) => {
          if (failures > 0) {
            failures -= 1;
            throw new SandboxError('TRANSPORT', 'the toolbox process died');
          }
          return real.call(request, options);
        },
        importTree: (tar, options) => real.importTree(tar, options),
        close: async () => {},
      };
    });
    return () => void (h.deps.sandboxes = pool);
  };
  const modelCalls = async (h: Harness) => (await h.deps.metrics.steps.get()).values.reduce((sum, each) => sum + each.value, 0);
  const tryStep = (h: Harness, attempt: number) => runAgentJob(h.deps, { ...step(0)(h), attempt });

  it('three tries fail on TRANSPORT, the fourth goes on: status.usage holds four answers', async () => {
    const h = await harness({ turns: [{ toolCalls: [read], usage: costly }, answers] });
    try {
      failFirstCalls(h, 3);
      for (const attempt of [1, 2, 3]) await expect(tryStep(h, attempt)).rejects.toThrow('the toolbox process died');
      const failed = (await h.states.load(h.ref))!;
      expect(failed).toMatchObject({ step: 0, discardedModelCalls: 3, usage: { totalTokens: 300 } });
      await tryStep(h, 4);
      const state = (await h.states.load(h.ref))!;
      expect(state).toMatchObject({ step: 1, toolCalls: 1, discardedModelCalls: 3, usage: { totalTokens: 400 } });
      expect(await modelCalls(h)).toBe(4);
      expect(h.enqueued).toEqual(['step 1']);
    } finally {
      await h.close();
    }
  });

  // A budget reached by the failed tries alone: maxTokens by the answers they paid for,
  // maxSteps by the model calls they made (each counts as one).
  it.each([
    { budget: 'maxTokens', limit: { maxTokens: 250 }, message: 'maxTokens' },
    { budget: 'maxSteps', limit: { maxSteps: 3 }, message: '3 of them model calls asked again' },
  ] as const)(
    'the tries that failed reach $budget: the next try stops BudgetExceeded without asking the model',
    async ({ limit, message }) => {
      const h = await harness({ turns: [{ toolCalls: [read], usage: costly }, answers], ...limit });
      try {
        const heal = failFirstCalls(h, Infinity);
        for (const attempt of [1, 2, 3]) await expect(tryStep(h, attempt)).rejects.toThrow('the toolbox process died');
        await tryStep(h, 4);
        expect(await modelCalls(h)).toBe(3);
        expect(h.enqueued).toEqual(['finalize']);
        // Finalize takes the diff from the sandbox.
        heal();
        await runAgentJob(h.deps, finalize()(h));
        expect(h.run().status).toMatchObject({ phase: 'Failed', reason: 'BudgetExceeded', usage: { totalTokens: 300 } });
        expect(h.run().status!.message).toContain(message);
      } finally {
        await h.close();
      }
    },
  );
});

// The controller queues a run's agent before its Running write lands, and that write carries
// the run's first timings (Queued, PodReady...). A step that read the run before it must not
// replace status.timings with what it read: its progress patch writes the array whole.
describe("status.timings, when a step read the run before the controller's Running write", () => {
  it.each(['none', 'kept'] as const)("keep the controller's entries (trailing records: %s)", async (trailing) => {
    const h = await harness({ turns: [writesHi, answers], ...(trailing === 'kept' ? { trailing } : {}) });
    try {
      const before = structuredClone(h.run());
      const controllers = [
        { phase: 'Queued' as const, start: new Date(Date.now() - 2_000).toISOString(), durationMs: 500 },
        { phase: 'PodReady' as const, start: new Date(Date.now() - 1_500).toISOString(), durationMs: 700 },
      ];
      await h.gateway.replaceRunStatus(h.run(), { ...h.run().status, timings: controllers });
      const getRun = h.deps.getRun;
      h.deps.getRun = () => Promise.resolve(structuredClone(before));
      await runAgentJob(h.deps, step(0)(h));
      await h.deps.trailing?.drain();
      expect(h.run().status!.steps).toBe(1);
      expect(h.run().status!.timings).toEqual(expect.arrayContaining(controllers));
      // The step's own entries go with the next write that reads the run as it is.
      h.deps.getRun = getRun;
      await runAgentJob(h.deps, step(1)(h));
      await runAgentJob(h.deps, finalize()(h));
      const phases = h.run().status!.timings!.map((entry) => entry.phase);
      expect(phases).toEqual(expect.arrayContaining(['Queued', 'PodReady', 'FirstModelCall', 'FirstToolCall', 'Finalize']));
      expect(h.run().status).toMatchObject({ phase: 'Succeeded', steps: 2 });
    } finally {
      await h.close();
    }
  });
});

describe('chamvi_tokens_total agrees with status.usage (issue #13)', () => {
  it("counts the compaction call's tokens too, under the run's namespace, and the transcript keeps the summary", async () => {
    // A 1024-token window and 14 KB of output: step 2 folds step 1 into a summary first (a model call of its own).
    const h = await harness({
      turns: [
        { toolCalls: [bash('seq 1 3000')], usage: { inputTokens: 100, outputTokens: 7 } },
        { ...answers, usage: { inputTokens: 300, outputTokens: 11 } },
      ],
      contextWindow: 1024,
    });
    try {
      await runAgentJob(h.deps, step(0)(h));
      await runAgentJob(h.deps, step(1)(h));
      // The answer's usage reaches status with finalize's write (end-step.ts).
      await runAgentJob(h.deps, finalize()(h));
      const run = h.run();
      const chunk = h.gateway.configMap(run.metadata.namespace, transcriptConfigMapName(run, 0))!;
      const { entries } = readTranscript([chunk], run);
      expect(entries.map((entry) => entry.key)).toEqual(['s000001', 's000002']);
      expect(entries[1]!.compaction).toMatchObject({ summarisedMessages: 1, usage: { inputTokens: 100, outputTokens: 7 } });
      const usage = run.status!.usage!;
      // The summary replays turn 0 (no assistant turn before the cut): 100 + 100 + 300 in.
      expect(usage).toMatchObject({ inputTokens: 500, outputTokens: 25 });
      const counted = new Map<string, number>();
      for (const { labels, value } of (await h.deps.metrics.tokens.get()).values) {
        expect(labels.namespace).toBe('agents');
        counted.set(String(labels.direction), (counted.get(String(labels.direction)) ?? 0) + value);
      }
      expect(Object.fromEntries(counted)).toEqual({ input: usage.inputTokens, output: usage.outputTokens });
    } finally {
      await h.close();
    }
  });
});

describe("a tool call still running at the run's deadline", () => {
  it('is answered TIMEOUT at the deadline, and saved, instead of holding the worker for the whole command', async () => {
    const h = await harness({ turns: [{ toolCalls: [bash('sleep 30; echo late')] }, answers], timeout: '3s' });
    try {
      await runAgentJob(h.deps, step(0)(h));
      const state = await h.states.load(h.ref);
      const results = JSON.stringify(state!.messages.at(-1));
      expect(results).toContain("TIMEOUT: the run's spec.budget.timeout passed while this call ran");
      expect(results).not.toContain('late');
      // The step ended, and its deadline being past, handed the run to finalize (DeadlineExceeded, its partial diff kept).
      expect(h.enqueued).toEqual(['finalize']);
    } finally {
      await h.close();
    }
  });
});

describe('two answers to one approval', () => {
  it("acts on one: the timeout's deny, come while the approved call still runs, is dropped, and the wait ends at the answer", async () => {
    const slow: ScriptedTurn = { toolCalls: [bash('sleep 1.5; echo approved >> hi.txt')], usage };
    const h = await harness({ turns: [slow, answers], approvalTools: ['bash'] });
    try {
      await runAgentJob(h.deps, step(0)(h));
      const id = pendingId(h);
      const sha256 = h.run().status!.pendingApproval!.inputSha256;
      const approving = runAgentJob(h.deps, resume(() => ({ id, decision: 'approve', sha256, user: 'alice' }))(h));
      // The approved call is running: the state still says waiting, as it did to the deny.
      await new Promise((resolve) => setTimeout(resolve, 500));
      await runAgentJob(h.deps, resume(() => ({ id, decision: 'deny', reason: 'approval.timeout passed', timedOut: true }))(h));
      await approving;
      const state = await h.states.load(h.ref);
      expect(JSON.stringify(state!.messages.at(-1))).not.toContain('DENIED');
      expect(h.run().status!.approvals).toEqual([expect.objectContaining({ id, decision: 'approve', user: 'alice' })]);
      expect(h.enqueued).toEqual(['step 1']);
      expect(readFileSync(path.join(h.workspace, 'hi.txt'), 'utf8')).toBe('approved\n');
      // The human's wait is up to the answer: the 1.5 s the approved call ran are the run's own time.
      expect(state!.approvalWaitMs).toBeLessThan(1_000);
    } finally {
      await h.close();
    }
  });
});

describe('a second answer to an approval already acted on', () => {
  it("runs none of the step's later calls again: the approve's job runs them, the timeout's deny come meanwhile is dropped", async () => {
    const approved = { toolName: 'write_file', input: { path: 'approved.txt', content: 'yes\n' } };
    const turn: ScriptedTurn = { toolCalls: [approved, bash('sleep 1.5; echo once >> after.txt')], usage };
    const h = await harness({ turns: [turn, answers], approvalTools: ['write_file'] });
    try {
      await runAgentJob(h.deps, step(0)(h));
      const id = pendingId(h);
      const sha256 = h.run().status!.pendingApproval!.inputSha256;
      const approving = runAgentJob(h.deps, resume(() => ({ id, decision: 'approve', sha256, user: 'alice' }))(h));
      // The approved call has run and the state moved on; the call after it is running.
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect((await h.states.load(h.ref))!.stage).toBe('stepping');
      await runAgentJob(h.deps, resume(() => ({ id, decision: 'deny', reason: 'approval.timeout passed', timedOut: true }))(h));
      await approving;
      expect(readFileSync(path.join(h.workspace, 'after.txt'), 'utf8')).toBe('once\n');
      expect(h.run().status!.approvals).toEqual([expect.objectContaining({ id, decision: 'approve', user: 'alice' })]);
      expect(h.enqueued).toEqual(['step 1']);
    } finally {
      await h.close();
    }
  });
});

describe(`a step with more than MAX_TOOL_CALLS_PER_STEP (${MAX_TOOL_CALLS_PER_STEP}) tool calls`, () => {
  // The SDK is given one call over the cap (providers/answer-bounds.ts): its work on an answer
  // grows faster than the answer's calls, and 170 000 of them ran the operator out of heap.
  it('runs the first ones, answers the one after with a tool error, and drops the rest unread, counted in the record', async () => {
    const many = Array.from({ length: MAX_TOOL_CALLS_PER_STEP + 6 }, (_, index) => bash(`echo ${index} >> calls.txt`));
    const h = await harness({ turns: [{ toolCalls: many, usage }, answers] });
    try {
      await runAgentJob(h.deps, step(0)(h));
      const ran = readFileSync(path.join(h.workspace, 'calls.txt'), 'utf8').trim().split('\n');
      expect(ran).toHaveLength(MAX_TOOL_CALLS_PER_STEP);
      expect(ran).not.toContain(String(MAX_TOOL_CALLS_PER_STEP));
      const state = (await h.states.load(h.ref))!;
      const asked = JSON.stringify(state.messages.at(-2));
      const answered = JSON.stringify(state.messages.at(-1));
      // The model is told of all 70 calls it made, the five the SDK never saw too.
      expect(answered.match(/TOO_MANY_CALLS: this step made 70 tool calls/g)).toHaveLength(1);
      expect(answered).toContain(`scripted-t0-c${MAX_TOOL_CALLS_PER_STEP}`);
      // The calls past the bound are not in the conversation at all: neither asked nor answered.
      expect(asked).not.toContain(`scripted-t0-c${MAX_TOOL_CALLS_PER_STEP + 1}"`);
      expect(answered).not.toContain(`scripted-t0-c${MAX_TOOL_CALLS_PER_STEP + 1}"`);
      expect(state.toolCalls).toBe(MAX_TOOL_CALLS_PER_STEP + 1);
      const run = h.run();
      const { entries } = readTranscript([h.gateway.configMap(run.metadata.namespace, transcriptConfigMapName(run, 0))!], run);
      expect(entries[0]).toMatchObject({ key: 's000001', unusableCalls: 6 });
    } finally {
      await h.close();
    }
  });
});

// Security: spec.approval gating every call (64 a step) made each answer an entry of its own,
// unbounded: 32 000 entries, about 508 MiB of ConfigMaps for one run (docs/transcript.md).
describe(`more than MAX_RECORDED_APPROVALS (${MAX_RECORDED_APPROVALS}) answers to approvals`, () => {
  it('records that many, then one cut entry and no more answers; the steps are still recorded and the run goes on', async () => {
    const gated: ScriptedTurn = {
      toolCalls: Array.from({ length: MAX_TOOL_CALLS_PER_STEP }, (_, index) => bash(`echo ${index}`)),
      usage,
    };
    const steps = Math.ceil((MAX_RECORDED_APPROVALS + 2) / MAX_TOOL_CALLS_PER_STEP);
    const h = await harness({ turns: [...Array.from({ length: steps }, () => gated), answers], approvalTools: ['bash'] });
    try {
      await runAgentJob(h.deps, step(0)(h));
      // Every call denied, each by its own resume; a step whose calls are all answered hands on.
      for (let answered = 0; answered < MAX_RECORDED_APPROVALS + 2;) {
        if (h.run().status!.phase === 'WaitingForApproval') {
          await runAgentJob(h.deps, deny(h));
          answered += 1;
        } else {
          await runAgentJob(h.deps, step(Number(h.enqueued.at(-1)!.replace('step ', '')))(h));
        }
      }
      expect(h.run().status).toMatchObject({ phase: 'WaitingForApproval', steps });
      const run = h.run();
      const { entries, problems } = readTranscript([h.gateway.configMap(run.metadata.namespace, transcriptConfigMapName(run, 0))!], run);
      expect(problems).toEqual([]);
      expect(entries.filter((entry) => entry.kind === 'approval')).toHaveLength(MAX_RECORDED_APPROVALS);
      expect(entries.filter((entry) => entry.kind === 'step').map((entry) => entry.step)).toEqual(
        Array.from({ length: steps }, (_, index) => index + 1),
      );
      const cutAt = Math.ceil((MAX_RECORDED_APPROVALS + 1) / MAX_TOOL_CALLS_PER_STEP);
      expect(entries.filter((entry) => entry.kind === 'cut')).toEqual([
        expect.objectContaining({
          key: cutKey(cutAt),
          message: expect.stringMatching(/answers to approvals; from approval \S+ on/),
        }),
      ]);
      // Written as it went: nothing past the cut, and the answers' Events all there.
      expect(h.events.filter((each) => /^s\d{6}-c\d+$/.test(each))).toHaveLength(MAX_RECORDED_APPROVALS);
      expect(h.events.filter((each) => each === 'Denied')).toHaveLength(MAX_RECORDED_APPROVALS + 2);
      expect((await h.states.load(h.ref))!.recordedApprovals).toBe(MAX_RECORDED_APPROVALS + 1);
    } finally {
      await h.close();
    }
  }, 240_000);
});

// The step's model over real HTTP: the openai-compatible adapter and the calling policy, as
// model-factory.ts builds it, against the fake OpenAI server.
describe('a model endpoint that answers what the operator must not work on whole', () => {
  let server: FakeOpenAIServer;
  beforeAll(async () => {
    server = await startFakeOpenAIServer();
  });
  afterAll(async () => {
    await server.stop();
  });
  const overHttp = (h: Harness, model: string) => {
    h.deps.models = async () =>
      withCallingPolicy(
        createLanguageModel({ provider: 'openai-compatible', name: model, baseURL: server.baseURL }, { apiKey: 'sk-test' }),
        {
          policy: DEFAULT_CALLING_POLICY,
          dependencies: createSystemCallingPolicyDependencies(),
        },
      );
  };

  it('an answer of 5 000 tool calls: asked once, the step goes on as with 65, its record counts the rest', async () => {
    server.enqueueFor('many-calls', {
      type: 'tool-calls',
      // Short calls, so 5 000 of them fit in the answer's bounds (MODEL_RESPONSE_MAX_BYTES, and
      // MODEL_RESPONSE_MAX_JSON_ITEMS at about six items a call; more are refused as they download).
      toolCalls: Array.from({ length: 5_000 }, (_, index) => ({ name: 'read_file', arguments: { path: 'README.md' }, id: `c${index}` })),
      usage: { promptTokens: 100, completionTokens: 50 },
    });
    const h = await harness({ turns: [answers] });
    try {
      overHttp(h, 'many-calls');
      await runAgentJob(h.deps, step(0)(h));
      expect(server.requestsFor('many-calls')).toHaveLength(1);
      expect(h.enqueued).toEqual(['step 1']);
      const state = (await h.states.load(h.ref))!;
      const asked = state.messages.at(-2)!.content as Array<{ type: string }>;
      expect(asked.filter((part) => part.type === 'tool-call')).toHaveLength(MAX_TOOL_CALLS_PER_STEP + 1);
      const answered = state.messages.at(-1)!.content as Array<{ toolCallId: string; output: { type: string; value: string } }>;
      expect(answered.filter((part) => part.output.type === 'text')).toHaveLength(MAX_TOOL_CALLS_PER_STEP);
      expect(answered.filter((part) => part.output.type === 'error-text')).toEqual([
        expect.objectContaining({
          toolCallId: 'c64',
          output: expect.objectContaining({ value: expect.stringMatching(/^TOO_MANY_CALLS: this step made 5000 tool calls/) }),
        }),
      ]);
      // The calls that ran and the one answered; the step's record counts the rest too.
      expect(state.toolCalls).toBe(MAX_TOOL_CALLS_PER_STEP + 1);
      const run = h.run();
      const { entries } = readTranscript([h.gateway.configMap(run.metadata.namespace, transcriptConfigMapName(run, 0))!], run);
      expect(entries[0]).toMatchObject({ key: 's000001', unusableCalls: 5_000 - MAX_TOOL_CALLS_PER_STEP });
      expect(state.usage).toMatchObject({ totalTokens: 150, complete: true });
    } finally {
      await h.close();
    }
  });

  // Two calls of one answer with one id: results were looked up by id, so both got the later
  // call's result, and the toolbox journal kept one entry for both (a redo ran the first again).
  // The ai SDK finds a call's parts by id, so the second comes out of generateText as a copy of
  // the first (its tool name is not asserted): it must not run as a call of its own.
  it('two calls with one id: the first runs and gets its own result, the second is answered DUPLICATE_TOOL_CALL_ID', async () => {
    server.enqueueFor('same-ids', {
      type: 'tool-calls',
      toolCalls: [
        { name: 'write_file', arguments: { path: 'dup.txt', content: 'written\n' }, id: 't' },
        { name: 'read_file', arguments: { path: 'dup.txt' }, id: 't' },
      ],
      usage: { promptTokens: 100, completionTokens: 50 },
    });
    const h = await harness({ turns: [answers] });
    try {
      overHttp(h, 'same-ids');
      await runAgentJob(h.deps, step(0)(h));
      expect(h.enqueued).toEqual(['step 1']);
      expect(readFileSync(path.join(h.workspace, 'dup.txt'), 'utf8')).toBe('written\n');
      const state = (await h.states.load(h.ref))!;
      const answered = state.messages.at(-1)!.content as Array<{
        toolCallId: string;
        toolName: string;
        output: { type: string; value: string };
      }>;
      expect(answered.map((part) => [part.toolCallId, part.output.type])).toEqual([
        ['t', 'text'],
        ['t', 'error-text'],
      ]);
      expect(answered[0]!.toolName).toBe('write_file');
      expect(JSON.parse(answered[0]!.output.value)).toEqual({ path: 'dup.txt', bytes: 8 });
      expect(answered[1]!.output.value).toMatch(/^DUPLICATE_TOOL_CALL_ID: an earlier tool call of this step has the id "t"/);
      expect(state.toolCalls).toBe(2);
      // What outlives the step pairs each call with its own result too: the write changed dup.txt
      // (the duplicate's error hid it from the files kept across compaction), the record shows
      // the write's output and then the duplicate's error, and an eval sees the write succeed.
      expect(state.filesTouched.changed).toEqual(['dup.txt']);
      const run = h.run();
      const transcript = readTranscript([h.gateway.configMap(run.metadata.namespace, transcriptConfigMapName(run, 0))!], run);
      expect(transcript.entries.map((entry) => entry.key)).toEqual(['s000001']);
      const calls = transcript.entries[0]!.calls!;
      expect(calls.map((call) => [call.id, call.result?.ok])).toEqual([
        ['t', true],
        ['t', false],
      ]);
      expect(calls[0]!.tool).toBe('write_file');
      expect(JSON.parse(calls[0]!.result!.output.text)).toEqual({ path: 'dup.txt', bytes: 8 });
      expect(calls[1]!.result!.output.text).toMatch(/^DUPLICATE_TOOL_CALL_ID/);
      expect(runEvidence(run, transcript).calls).toEqual([
        { tool: 'write_file', ok: true },
        { tool: expect.any(String), ok: false },
      ]);
    } finally {
      await h.close();
    }
  });

  it('two calls with one id, then a call that waits for approval: the records of the step and of the resume pair each call with its own result', async () => {
    server.enqueueFor('same-ids-parked', {
      type: 'tool-calls',
      toolCalls: [
        { name: 'write_file', arguments: { path: 'dup.txt', content: 'written\n' }, id: 't' },
        { name: 'read_file', arguments: { path: 'dup.txt' }, id: 't' },
        { name: 'bash', arguments: { command: 'cat dup.txt' }, id: 'u' },
      ],
      usage: { promptTokens: 100, completionTokens: 50 },
    });
    const h = await harness({ turns: [answers], approvalTools: ['bash'] });
    try {
      overHttp(h, 'same-ids-parked');
      await runAgentJob(h.deps, step(0)(h));
      expect(h.run().status).toMatchObject({ phase: 'WaitingForApproval', pendingApproval: { toolName: 'bash' } });
      const run = h.run();
      const read = () => readTranscript([h.gateway.configMap(run.metadata.namespace, transcriptConfigMapName(run, 0))!], run);
      const parked = read().entries[0]!.calls!;
      expect(parked.map((call) => [call.id, call.result?.ok, call.waiting !== undefined])).toEqual([
        ['t', true, false],
        ['t', false, false],
        ['u', undefined, true],
      ]);
      expect(JSON.parse(parked[0]!.result!.output.text)).toEqual({ path: 'dup.txt', bytes: 8 });
      expect(parked[1]!.result!.output.text).toMatch(/^DUPLICATE_TOOL_CALL_ID/);

      await runAgentJob(h.deps, approveAsShown(h));
      expect(h.enqueued).toEqual(['step 1']);
      const transcript = read();
      expect(transcript.entries.map((entry) => entry.key)).toEqual(['s000001', 's000001-c000003']);
      const resumed = transcript.entries[1]!.calls!;
      expect(resumed.map((call) => [call.id, call.tool, call.result?.ok])).toEqual([['u', 'bash', true]]);
      expect(resumed[0]!.result!.output.text).toContain('written');
      expect((await h.states.load(h.ref))!.filesTouched.changed).toEqual(['dup.txt']);
      expect(runEvidence(h.run(), transcript).calls).toEqual([
        { tool: 'write_file', ok: true },
        { tool: expect.any(String), ok: false },
        { tool: 'bash', ok: true },
      ]);
    } finally {
      await h.close();
    }
  });

  it('two calls with one id, redone after the first was saved: the second is not taken as done, it gets its own answer', async () => {
    const h = await harness({ turns: [answers] });
    try {
      const state = (await h.states.load(h.ref))!;
      const calls = [
        { toolCallId: 't', toolName: 'write_file', input: { path: 'dup.txt', content: 'written\n' } },
        { toolCallId: 't', toolName: 'read_file', input: { path: 'dup.txt' } },
      ];
      state.step = 1;
      state.messages.push({ role: 'assistant', content: calls.map((call) => ({ type: 'tool-call' as const, ...call })) });
      // The write ran and was saved; the worker died before the read.
      state.inFlight = {
        calls,
        results: [{ toolCallId: 't', toolName: 'write_file', ok: true, text: '{"path":"dup.txt","bytes":8}' }],
        earlier: [],
        hadToolCalls: true,
        toolNames: ['write_file', 'read_file'],
        text: '',
        resumed: false,
      };
      await h.states.save(state);
      await runAgentJob(h.deps, step(0)(h));
      const after = (await h.states.load(h.ref))!;
      const answered = after.messages.at(-1)!.content as Array<{ toolName: string; output: { type: string; value: string } }>;
      expect(answered.map((part) => [part.toolName, part.output.type])).toEqual([
        ['write_file', 'text'],
        ['read_file', 'error-text'],
      ]);
      expect(answered[0]!.output.value).toBe('{"path":"dup.txt","bytes":8}');
      expect(answered[1]!.output.value).toMatch(/^DUPLICATE_TOOL_CALL_ID/);
    } finally {
      await h.close();
    }
  });

  // An endpoint that reports 0 and 0 (a proxy answering `usage: {}`, which the SDK reads so) is
  // not believed: its call counts the operator's estimate, marked incomplete, and the budgets
  // hold. Believed, the call counted 0, complete, and the run went on past maxTokens.
  it("an endpoint reporting 0 tokens for a call: the operator's estimate counts, incomplete, and maxTokens stops the run", async () => {
    server.enqueueFor(
      'zero-usage',
      {
        type: 'tool-calls',
        toolCalls: [{ name: 'bash', arguments: { command: 'echo hi >> hi.txt' } }],
        usage: { promptTokens: 0, completionTokens: 0 },
      },
      { type: 'text', text: 'done', usage: { promptTokens: 0, completionTokens: 0 } },
    );
    const h = await harness({ turns: [answers], endpoint: server.baseURL, maxTokens: 100 });
    try {
      overHttp(h, 'zero-usage');
      await runAgentJob(h.deps, step(0)(h));
      const state = (await h.states.load(h.ref))!;
      expect(state.usage.complete).toBe(false);
      expect(state.usage.inputTokens).toBeGreaterThan(100);
      // The step that spent past maxTokens ends the loop: no second model call.
      expect(h.enqueued).toEqual(['finalize']);
      await runAgentJob(h.deps, finalize()(h));
      expect(server.requestsFor('zero-usage')).toHaveLength(1);
      expect(h.run().status).toMatchObject({ phase: 'Failed', reason: 'BudgetExceeded', usage: { complete: false } });
      expect(h.run().status!.message).toMatch(/the provider did not report them all/);
    } finally {
      await h.close();
    }
  });

  // A tool call id is the model's free text. One of 300 characters was refused by the toolbox
  // (its call journal takes `s<step>:<id>` up to 256), so the call failed; one of 600 was saved
  // with the approval it waits for, and the next load refused the state (its schema takes 512):
  // the run ended StateLost.
  it('tool call ids of 300 and 600 characters: both calls run under a replaced id, the same in the call and its result, through an approval', async () => {
    const long = 'x'.repeat(300);
    const longer = 'y'.repeat(600);
    server.enqueueFor('long-ids', {
      type: 'tool-calls',
      toolCalls: [
        { name: 'write_file', arguments: { path: 'long.txt', content: 'written\n' }, id: long },
        { name: 'bash', arguments: { command: 'cat long.txt' }, id: longer },
      ],
      usage: { promptTokens: 5_000, completionTokens: 50 },
    });
    const h = await harness({ turns: [answers], approvalTools: ['bash'] });
    try {
      overHttp(h, 'long-ids');
      await runAgentJob(h.deps, step(0)(h));
      expect(h.run().status).toMatchObject({ phase: 'WaitingForApproval', pendingApproval: { toolName: 'bash' } });
      await runAgentJob(h.deps, approveAsShown(h));
      expect(h.enqueued).toEqual(['step 1']);
      const state = (await h.states.load(h.ref))!;
      const replaced = [usableToolCallId(long), usableToolCallId(longer)];
      const asked = state.messages.at(-2)!.content as Array<{ type: string; toolCallId?: string }>;
      expect(asked.filter((part) => part.type === 'tool-call').map((part) => part.toolCallId)).toEqual(replaced);
      const answered = state.messages.at(-1)!.content as Array<{ toolCallId: string; output: { type: string; value: string } }>;
      expect(answered.map((part) => [part.toolCallId, part.output.type])).toEqual([
        [replaced[0], 'text'],
        [replaced[1], 'text'],
      ]);
      expect(answered[1]!.output.value).toContain('written');
      expect(readFileSync(path.join(h.workspace, 'long.txt'), 'utf8')).toBe('written\n');
      expect(replaced.every((id) => id.length <= MAX_TOOL_CALL_ID_CHARS)).toBe(true);
    } finally {
      await h.close();
    }
  });

  // Unbounded, the SDK kept the parsed arguments of a call its tool refused (command is not a
  // string) and copied them recursively, which overflowed the stack (from about 2 000 levels in
  // a process just started, deeper once its code is optimised: 100 000 overflows either way);
  // the step was retried as a transport error, asking the model ten times and counting none
  // of its tokens.
  it('arguments nested 100 000 deep: asked once, the model gets a tool error, and the tokens are counted', async () => {
    const nested = `{"command":5,"x":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    server.enqueueFor('deep-arguments', {
      type: 'tool-calls',
      toolCalls: [{ name: 'bash', arguments: nested }],
      usage: { promptTokens: 40, completionTokens: 2_500 },
    });
    const h = await harness({ turns: [answers] });
    try {
      overHttp(h, 'deep-arguments');
      await runAgentJob(h.deps, step(0)(h));
      expect(server.requestsFor('deep-arguments')).toHaveLength(1);
      expect(h.enqueued).toEqual(['step 1']);
      const state = (await h.states.load(h.ref))!;
      expect(JSON.stringify(state.messages.at(-1))).toContain('nested more than 64 levels deep');
      expect(state.usage).toMatchObject({ totalTokens: 2_540, complete: true });
      expect(state.toolCalls).toBe(1);
    } finally {
      await h.close();
    }
  });

  // Left to job-failure.ts, such an error was a transport error: ten tries, each asking the model again.
  it('an answer the SDK fails on once it arrived: the run fails ModelResponseInvalid at once, the model asked once, its tokens counted', async () => {
    let calls = 0;
    const breaking = generatingModel('breaking', async () => {
      calls += 1;
      // A provider tool's result for a call the answer never made: generateText throws on it.
      return [{ type: 'tool-result', toolCallId: 'ws_secret-page', toolName: 'web_search', result: { found: 'internal page text' } }];
    });
    const h = await harness({ turns: [answers] });
    try {
      h.deps.models = async () => breaking;
      await runAgentJob(h.deps, step(0)(h));
      expect(calls).toBe(1);
      expect(h.enqueued).toEqual([]);
      expect(h.run().status).toMatchObject({ phase: 'Failed', reason: 'ModelResponseInvalid', usage: { totalTokens: 42 } });
      // The error's name only: its message quotes the answer (Security #11.3).
      expect(h.run().status!.message).toContain('its answer could not be worked on (Error)');
      expect(h.run().status!.message).not.toContain('ws_secret-page');
      const counted = (await h.deps.metrics.tokens.get()).values.reduce((sum, each) => sum + each.value, 0);
      expect(counted).toBe(42);
    } finally {
      await h.close();
    }
  });
});

// An endpoint that reports no usage spent without end under every token budget.
describe('a model that reports no usage', () => {
  it("counts the operator's estimate, marked incomplete, in the namespace's day too, and spec.budget.maxTokens stops the run", async () => {
    const h = await harness({ turns: [{ toolCalls: [bash('echo hi >> hi.txt')] }, { text: 'done' }], maxTokens: 100 });
    let namespaceDay = 0;
    h.deps.teamBudget = {
      policies: { policyOf: async () => ({ problems: [] }) },
      tally: { add: async (_namespace, _day, tokens) => (namespaceDay += tokens), read: async () => namespaceDay },
    };
    try {
      await runAgentJob(h.deps, step(0)(h));
      const state = (await h.states.load(h.ref))!;
      // The request alone (system prompt, tool schemas) is thousands of tokens.
      expect(state.usage.totalTokens).toBeGreaterThan(1_000);
      expect(state.usage.complete).toBe(false);
      expect(namespaceDay).toBe(state.usage.totalTokens);
      expect(h.enqueued).toEqual(['finalize']);
      expect(state.stop).toMatchObject({
        reason: 'BudgetExceeded',
        message: expect.stringContaining("the rest are the operator's estimate"),
      });
      await runAgentJob(h.deps, finalize()(h));
      expect(h.run().status).toMatchObject({ phase: 'Failed', reason: 'BudgetExceeded', usage: { complete: false } });
    } finally {
      await h.close();
    }
  });
});

describe('a compaction whose next call fails (#13.10)', () => {
  it("still counts the compaction's tokens in chamvi_tokens_total, under the model label 'script'", async () => {
    const h = await harness({
      turns: [
        { toolCalls: [bash('seq 1 3000')], usage: { inputTokens: 100, outputTokens: 7 } },
        { ...answers, usage: { inputTokens: 300, outputTokens: 11 } },
      ],
      contextWindow: 1024,
    });
    // The provider fails the call with tools after the summary (the summary call has none).
    const models = h.deps.models;
    let failing = false;
    h.deps.models = async (...args) => {
      const model = (await models(...args)) as LanguageModelV4;
      return Object.assign(Object.create(model) as LanguageModelV4, {
        doGenerate: (options: Parameters<LanguageModelV4['doGenerate']>[0]) => {
          if (failing && options.tools?.length) throw new Error('the provider is down');
          return model.doGenerate(options);
        },
      });
    };
    try {
      await runAgentJob(h.deps, step(0)(h));
      failing = true;
      await expect(runAgentJob(h.deps, step(1)(h))).rejects.toThrow('the provider is down');
      const counted = new Map<string, number>();
      for (const { labels, value } of (await h.deps.metrics.tokens.get()).values) {
        expect(labels.model).toBe('script');
        counted.set(String(labels.direction), (counted.get(String(labels.direction)) ?? 0) + value);
      }
      // Step 1's call (100 in, 7 out) and the summary of it, which replays turn 0 (100 in, 7 out).
      expect(Object.fromEntries(counted)).toEqual({ input: 200, output: 14 });
      // The state too: the retry compacts again, and checks maxTokens with this one counted.
      expect((await h.states.load(h.ref))!.usage.totalTokens).toBe(214);
    } finally {
      await h.close();
    }
  });
});

describe('landed marks in Redis (security #11.1: Redis is not trusted)', () => {
  it("believes only a mark sealed with the operator's key, for that run and step", async () => {
    const seal = RunStateSeal.generated();
    const marks = redisLandedMarks(server.redis, 'marks', seal);
    expect(await marks.landed('uid-m', 4)).toBe(false);
    await marks.mark('uid-m', 4);
    expect(await marks.landed('uid-m', 4)).toBe(true);
    expect(await marks.landed('uid-m', 5)).toBe(false);
    expect(await marks.landed('uid-other', 4)).toBe(false);
    // Written by whoever can write Redis, without the key: the record is sent again.
    await server.redis.set('marks:landed:uid-m', JSON.stringify({ landed: 'uid-m', step: 5 }));
    expect(await marks.landed('uid-m', 5)).toBe(false);
    await server.redis.set('marks:landed:uid-m', RunStateSeal.generated().seal(JSON.stringify({ landed: 'uid-m', step: 5 })));
    expect(await marks.landed('uid-m', 5)).toBe(false);
    // A genuine mark of another run, copied under this run's key, names the other run.
    await marks.mark('uid-x', 5);
    await server.redis.set('marks:landed:uid-m', (await server.redis.get('marks:landed:uid-x'))!);
    expect(await marks.landed('uid-m', 5)).toBe(false);
  });
});

// Sizes that only a real step shows: the SDK's own tool errors, and a step of many reads.
describe('what a step sends is bounded', () => {
  it("bounds the SDK's tool error for an invalid 300 KB bash call to 64 KiB, and drops the call's input", async () => {
    const h = await harness({ turns: [{ toolCalls: [bash('y'.repeat(300_000))], usage }, answers] });
    try {
      await runAgentJob(h.deps, step(0)(h));
      const state = (await h.states.load(h.ref))!;
      const [assistant, tool] = state.messages.slice(-2) as { content: { type: string; input?: unknown; output?: { value: string } }[] }[];
      expect(assistant!.content.find((part) => part.type === 'tool-call')!.input).toEqual({});
      const error = tool!.content[0]!.output!.value;
      expect(error).toMatch(/^AI_InvalidToolInputError: Invalid input for tool bash/);
      expect(Buffer.byteLength(error)).toBeLessThanOrEqual(64 * 1024);
      expect(Buffer.byteLength(JSON.stringify(state.messages))).toBeLessThan(80 * 1024);
    } finally {
      await h.close();
    }
  });

  it('sends the call after nine full reads under a 32k window, the reads cut by whole lines', async () => {
    const writesFile = bash('for i in $(seq 0 1999); do echo "line $i: export const value$i = compute($i); // more text"; done > big.ts');
    const reads = Array.from({ length: 9 }, (_, index) => ({ toolName: 'read_file', input: { path: 'big.ts', offset: index + 1 } }));
    const h = await harness({
      turns: [{ toolCalls: [writesFile], usage }, { toolCalls: reads, usage }, answers],
      contextWindow: 32_768,
    });
    // What each call sent, as the context estimate counts it.
    const sent: number[] = [];
    const models = h.deps.models;
    h.deps.models = async (...args) => {
      const model = (await models(...args)) as LanguageModelV4;
      return Object.assign(Object.create(model) as LanguageModelV4, {
        doGenerate: (options: Parameters<LanguageModelV4['doGenerate']>[0]) => {
          sent.push(estimateTextTokens(JSON.stringify(options.prompt)) + estimateTextTokens(JSON.stringify(options.tools ?? [])));
          return model.doGenerate(options);
        },
      });
    };
    try {
      for (let completed = 0; completed < 3; completed += 1) await runAgentJob(h.deps, step(completed)(h));
      expect(h.enqueued.at(-1)).toBe('finalize');
      const state = (await h.states.load(h.ref))!;
      const results = (state.messages.findLast((message) => message.role === 'tool')!.content as { output: { value: string } }[]).map(
        (part) => JSON.parse(part.output.value) as { startLine: number; endLine: number; truncated: boolean },
      );
      expect(results).toHaveLength(9);
      for (const [index, read] of results.entries()) {
        expect(read).toMatchObject({ startLine: index + 1, truncated: true });
        expect(read.endLine).toBeGreaterThan(read.startLine + 10);
      }
      // Nine reads of 64 KiB are about 150 000 tokens; what went out fits the window (JSON of the SDK's prompt, a little more than the messages).
      expect(Math.max(...sent)).toBeLessThanOrEqual(32_768);
    } finally {
      await h.close();
    }
  });
});
