// A call the provider says it ran (an OpenAI Responses `mcp_call` or `mcp_approval_request`,
// named `mcp.<anything>`): the SDK keeps it though the run offers no such tool. It used to be
// kept as one of the step's calls: beside a gated bash call, the run parked on bash with
// `mcp.x` among the calls left, a name its state's schema refuses, so the approver's answer
// found the state unreadable and the run ended Failed StateLost. Such a call is answered with
// a tool error as a tool not offered is, and the run goes on. The step runs as the worker runs
// it (runAgentJob), against the real OpenAI Responses adapter over HTTP (the fake server),
// with the bundled toolbox in a local sandbox, the in-memory API server and a real redis-server.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { memoryRunResources } from '../../operator/src/cli/local/memory-run-resources.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { OperatorMetrics } from '../../operator/src/observability/operator-metrics.ts';
import { DEFAULT_CALLING_POLICY, createSystemCallingPolicyDependencies } from '../../operator/src/providers/calling-policy.ts';
import { createLanguageModel } from '../../operator/src/providers/create-language-model.ts';
import { withCallingPolicy } from '../../operator/src/providers/with-calling-policy.ts';
import { createLocalSandbox, type LocalSandbox } from '../../operator/src/sandbox/local-sandbox.ts';
import type { AgentDependencies, RunRef } from '../../operator/src/workers/agent-dependencies.ts';
import { runAgentJob, type AgentJob } from '../../operator/src/workers/run-agent-job.ts';
import { RunStateStore } from '../../operator/src/workers/run-state.ts';
import { RunStateSeal } from '../../operator/src/workers/run-state-seal.ts';
import { RunStatusWriter } from '../../operator/src/workers/run-status-writer.ts';
import { SandboxPool } from '../../operator/src/workers/sandbox-pool.ts';
import { startingState } from '../../operator/src/workers/starting-state.ts';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../support/fake-openai-server.ts';
import { redisServerForSuite } from '../support/redis-server-suite.ts';

const redis = redisServerForSuite();
const scratch = mkdtempSync(path.join(tmpdir(), 'chamvi-provider-calls-'));
let server: FakeOpenAIServer;
let rows = 0;
beforeAll(async () => {
  server = await startFakeOpenAIServer();
});
afterAll(async () => {
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
});

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, encoding: 'utf8' });

interface Harness {
  deps: AgentDependencies;
  ref: RunRef;
  states: RunStateStore;
  workspace: string;
  enqueued: string[];
  run(): CodingRun;
  close(): Promise<void>;
}

/** A run whose model is `model` on the fake server through the OpenAI Responses adapter, bash gated behind approval. */
async function harness(model: string): Promise<Harness> {
  rows += 1;
  const ref = { uid: `uid-${rows}`, namespace: 'agents', name: `run-${rows}` };
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
      // The spec names OpenAI itself (whose endpoint is fixed); deps.models points it at the fake server.
      model: { provider: 'openai', name: model, apiKeySecretRef: { name: 'llm' } },
      approval: { tools: ['bash'] },
      budget: { maxSteps: 20 },
    } as CodingRun['spec'],
    status: { phase: 'Running', startTime: new Date().toISOString(), message: 'The agent is working.' },
  };
  const gateway = new MemoryKubeGateway(run, { configMaps: new Map(), secrets: new Map() }, () => {});
  const logger = {
    info() {},
    warn() {},
    error() {},
    child() {
      return logger;
    },
  };
  const prefix = `provider-calls-${rows}`;
  const states = new RunStateStore(redis.redis, prefix, RunStateSeal.generated());
  const sandbox: LocalSandbox = await createLocalSandbox({ mode: 'serve', workspaceDir: workspace, homeDir: home });
  const enqueued: string[] = [];
  const deps: AgentDependencies = {
    states,
    status: new RunStatusWriter(gateway),
    resources: memoryRunResources(gateway),
    sandboxes: new SandboxPool(() => sandbox),
    queue: {
      step: async (_ref, completed) => void enqueued.push(`step ${completed}`),
      finalize: async () => void enqueued.push('finalize'),
      publish: async () => void enqueued.push('publish'),
    },
    // The real Responses adapter and calling policy, the key given here rather than read from a Secret.
    models: async () =>
      withCallingPolicy(createLanguageModel({ provider: 'openai', name: model, baseURL: server.baseURL }, { apiKey: 'sk-test' }), {
        policy: DEFAULT_CALLING_POLICY,
        dependencies: createSystemCallingPolicyDependencies(),
      }),
    events: new EventRecorder(gateway, 'test', logger),
    transcript: memoryTranscriptWriter(gateway, () => {}),
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    getRun: (namespace, name) => gateway.getRun(namespace, name),
    clonePolicy: { allowRepo: [], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 10_000 },
    logger,
    now: () => new Date(),
  };
  await states.create(startingState(ref, Date.now()));
  return { deps, ref, states, workspace, enqueued, run: () => gateway.current()!, close: () => sandbox.close() };
}

const job = (name: AgentJob['name'], ref: RunRef, extra: Partial<AgentJob['data']> = {}): AgentJob => ({
  name,
  data: { ...ref, ...extra },
  attempt: 1,
  attempts: 10,
});

/** A Responses API answer of these output items, as OpenAI sends it (non-streamed). */
const responsesAnswer = (output: unknown[]) => ({
  type: 'raw' as const,
  body: JSON.stringify({
    id: `resp_${output.length}`,
    object: 'response',
    created_at: 0,
    status: 'completed',
    model: 'gpt-test',
    output,
    incomplete_details: null,
    usage: {
      input_tokens: 1_000,
      output_tokens: 40,
      total_tokens: 1_040,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    },
  }),
});

const bashCall = {
  type: 'function_call',
  id: 'fc_1',
  call_id: 'call_bash',
  name: 'bash',
  arguments: JSON.stringify({ command: 'echo hi >> hi.txt' }),
  status: 'completed',
};
const mcpCall = { type: 'mcp_call', id: 'mcp_1', status: 'completed', arguments: '{"q":1}', name: 'x', server_label: 'srv', output: 'ran' };
const mcpApproval = { type: 'mcp_approval_request', id: 'mcpr_1', server_label: 'srv', name: 'deploy', arguments: '{}' };
const NOT_OFFERED = /^Model tried to call unavailable tool 'mcp\.x'\. Available tools: .*\bbash\b/;

/** The function_call_output items of a Responses request, by call_id. */
function outputsSent(request: { body: unknown } | undefined): Record<string, string> {
  const input = (request?.body as { input?: Array<{ type: string; call_id?: string; output?: unknown }> } | undefined)?.input ?? [];
  return Object.fromEntries(
    input
      .filter((item) => item.type === 'function_call_output')
      .map((item) => [item.call_id, typeof item.output === 'string' ? item.output : JSON.stringify(item.output)]),
  );
}

/** The names of the function_call items of a Responses request, by call_id. */
function callsSent(request: { body: unknown } | undefined): Record<string, string | undefined> {
  const input = (request?.body as { input?: Array<{ type: string; call_id?: string; name?: string }> } | undefined)?.input ?? [];
  return Object.fromEntries(input.filter((item) => item.type === 'function_call').map((item) => [item.call_id, item.name]));
}

describe('a call the provider says it ran, to a tool the run does not offer', () => {
  it('beside a gated bash call: the run parks on bash alone, the approval runs it, and the model is told mcp.x is not offered', async () => {
    server.enqueueFor('mcp-beside-bash', responsesAnswer([bashCall, mcpCall]), {
      type: 'text',
      text: 'done',
      usage: { promptTokens: 1_200, completionTokens: 5 },
    });
    const h = await harness('mcp-beside-bash');
    try {
      await runAgentJob(h.deps, job('step', h.ref, { step: 0 }));
      const parked = h.run().status!;
      expect(parked).toMatchObject({ phase: 'WaitingForApproval', pendingApproval: { toolName: 'bash' } });
      const saved = (await h.states.load(h.ref))!;
      expect(saved.pendingApproval?.remaining ?? []).toEqual([]);
      expect(saved.toolCalls).toBe(1);

      const { id, inputSha256: sha256 } = parked.pendingApproval!;
      await runAgentJob(h.deps, job('resume', h.ref, { approval: { id, decision: 'approve', sha256 } }));
      expect(h.run().status).toMatchObject({ phase: 'Running' });
      expect(h.run().status!.reason).not.toBe('StateLost');
      expect(readFileSync(path.join(h.workspace, 'hi.txt'), 'utf8')).toBe('hi\n');
      expect(h.enqueued).toEqual(['step 1']);

      // The next model call carries bash's result and the tool error answering mcp.x.
      await runAgentJob(h.deps, job('step', h.ref, { step: 1 }));
      const sent = outputsSent(server.requestsFor('mcp-beside-bash')[1]);
      expect(Object.keys(sent).sort()).toEqual(['call_bash', 'mcp_1']);
      // The adapter sends a tool error as {"error": text}.
      expect((JSON.parse(sent.mcp_1!) as { error: string }).error).toMatch(NOT_OFFERED);
      // OpenAI refuses `mcp.x` as a function name, in the history too: the call goes back under one it takes.
      expect(callsSent(server.requestsFor('mcp-beside-bash')[1])).toEqual({ call_bash: 'bash', mcp_1: 'unavailable_tool' });
      expect(h.enqueued).toEqual(['step 1', 'finalize']);
      const state = (await h.states.load(h.ref))!;
      expect(state.toolCalls).toBe(2);
      const metricTools = (await h.deps.metrics.toolCalls.get()).values.map((each) => each.labels.tool);
      expect(metricTools).toEqual(['bash']);
    } finally {
      await h.close();
    }
  });

  it('an answer of only provider calls (an MCP call and an MCP approval request): both answered with a tool error, the loop goes on', async () => {
    server.enqueueFor('mcp-only', responsesAnswer([mcpCall, mcpApproval]));
    const h = await harness('mcp-only');
    try {
      await runAgentJob(h.deps, job('step', h.ref, { step: 0 }));
      expect(h.run().status).toMatchObject({ phase: 'Running' });
      expect(h.enqueued).toEqual(['step 1']);
      const state = (await h.states.load(h.ref))!;
      expect(state.pendingApproval).toBeUndefined();
      expect(state.toolCalls).toBe(2);
      expect(state.unusableToolCallSteps).toBe(1);
      const [asked, answered] = state.messages.slice(-2) as Array<{ role: string; content: Array<Record<string, unknown>> }>;
      // The provider's result and approval request are gone: nothing ran here, and nothing asks.
      expect(asked!.content.map((part) => [part.type, part.toolName, part.providerExecuted])).toEqual([
        ['tool-call', 'unavailable_tool', undefined],
        ['tool-call', 'unavailable_tool', undefined],
      ]);
      expect(answered!.role).toBe('tool');
      expect(answered!.content.map((part) => (part.output as { type: string; value: string }).type)).toEqual(['error-text', 'error-text']);
      expect((answered!.content[0]!.output as { value: string }).value).toMatch(NOT_OFFERED);
      expect((answered!.content[1]!.output as { value: string }).value).toMatch(/^Model tried to call unavailable tool 'mcp\.deploy'/);
    } finally {
      await h.close();
    }
  });
});
