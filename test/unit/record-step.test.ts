// workers/record-step.ts writing a resumed approval's entry: its key comes from the approval's
// call number, which counts every call of the run (refused ones too), so it can pass 999999.
// Written through local mode's writer (the same encoding and chunks as the operator's) and
// read back as `kubectl codingrun logs` reads it. The answers a run records are bounded.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import type { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { readTranscript } from '../../operator/src/record/transcript-chunks.ts';
import { ENTRY_KEY_PATTERN, MAX_RECORDED_APPROVALS, cutKey, resumeKey } from '../../operator/src/record/transcript-entry.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { recordStep, stepEntry, writeStepEntry } from '../../operator/src/workers/record-step.ts';
import type { InFlightStep, RunState, ToolResultRecord } from '../../operator/src/workers/run-state.ts';
import { repeatedIdResult } from '../../operator/src/workers/repeated-call-ids.ts';
import { runStateProblem } from '../../operator/src/workers/run-state-schema.ts';
import type { TranscriptRun } from '../../operator/src/workers/transcript-writer.ts';

const now = new Date('2026-12-06T12:00:00.000Z');
const run = { metadata: { name: 'spammed', namespace: 'agents', uid: '0b6f3c1e-3a4b-4c5d-8e9f-0a1b2c3d4e5f' } } as TranscriptRun &
  CodingRun;

function writer() {
  const stored = new Map<string, V1ConfigMap>();
  const gateway = {
    configMap: (_namespace: string, name: string) => stored.get(name),
    putConfigMap: (configMap: V1ConfigMap) => stored.set(configMap.metadata!.name!, configMap),
  } as unknown as MemoryKubeGateway;
  const warnings: unknown[] = [];
  const deps = {
    transcript: memoryTranscriptWriter(gateway, () => undefined),
    events: { record: async () => undefined },
    logger: { warn: (...args: unknown[]) => warnings.push(args) },
  } as unknown as Pick<AgentDependencies, 'transcript' | 'events' | 'logger'>;
  return { deps, stored, warnings };
}

describe('writeStepEntry', () => {
  it("writes the answer to an approval past the run's millionth call, and a reader reads it back under its key", async () => {
    const call = { toolCallId: 'c1', toolName: 'bash', input: { command: 'make' } };
    const state = {
      version: 2,
      uid: run.metadata.uid,
      namespace: 'agents',
      name: 'spammed',
      stage: 'stepping',
      step: 12,
      toolCalls: 1_000_001,
      messages: [],
      usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, reasoningTokens: 0, totalTokens: 0, complete: true },
      filesTouched: { read: [], changed: [] },
      startedAt: 0,
    } satisfies RunState;
    const resumed: InFlightStep = {
      calls: [],
      results: [],
      earlier: [{ toolCallId: 'c1', toolName: 'bash', ok: true, text: 'done' }],
      hadToolCalls: true,
      toolNames: ['bash'],
      text: '',
      resumed: true,
      record: {
        startedAt: now.toISOString(),
        answered: call,
        approval: { id: 's12-c1000001', tool: 'bash', decision: 'approve', requestedAt: now.toISOString(), answeredAt: now.toISOString() },
      },
    };
    const entry = stepEntry(state, resumed, now);
    expect(entry.key).toBe(resumeKey(12, 's12-c1000001'));
    const { deps, stored, warnings } = writer();
    await writeStepEntry(deps, run, entry);
    const transcript = readTranscript([...stored.values()], run);
    expect(transcript.problems).toEqual([]);
    expect(transcript.entries.map((each) => [each.key, each.approval?.id])).toEqual([['s000012-c1000001', 's12-c1000001']]);
    expect(warnings).toEqual([]);
  });

  it('keys every call number a run can reach, up to the largest integer a JavaScript number holds', () => {
    for (const call of [1, 999_999, 1_000_000, 123_456_789, Number.MAX_SAFE_INTEGER])
      expect(resumeKey(1000, `s1000-c${call}`)).toMatch(ENTRY_KEY_PATTERN);
  });
});

describe('recordStep', () => {
  // Security: every call gated by spec.approval, 64 a step, made each answer an entry of its
  // own: 32 000 of them (about 508 MiB of ConfigMaps) for one run, bounded by nothing.
  it(`records ${MAX_RECORDED_APPROVALS} answers to approvals, then one cut entry, then none, counted in the saved state`, async () => {
    const { deps, stored, warnings } = writer();
    const answers = MAX_RECORDED_APPROVALS + 30;
    let state: RunState = {
      version: 2,
      uid: run.metadata.uid,
      namespace: 'agents',
      name: 'spammed',
      stage: 'stepping',
      step: 0,
      toolCalls: 0,
      messages: [],
      usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, reasoningTokens: 0, totalTokens: 0, complete: true },
      filesTouched: { read: [], changed: [] },
      startedAt: 0,
    };
    // A state saved before the field existed still loads.
    expect(runStateProblem(state)).toBeUndefined();
    const recordDeps = { ...deps, now: () => now };
    for (let call = 1; call <= answers; call++) {
      // 64 gated calls a step, each denied: its own resume, its own entry.
      const step = Math.ceil(call / 64);
      const id = `s${step}-c${call}`;
      const resumed: InFlightStep = {
        calls: [],
        results: [],
        earlier: [{ toolCallId: `c${call}`, toolName: 'bash', ok: false, text: 'denied' }],
        hadToolCalls: true,
        toolNames: ['bash'],
        text: '',
        resumed: true,
        record: {
          startedAt: now.toISOString(),
          answered: { toolCallId: `c${call}`, toolName: 'bash', input: { command: 'x'.repeat(4096) } },
          approval: { id, tool: 'bash', decision: 'deny', requestedAt: now.toISOString(), answeredAt: now.toISOString() },
        },
      };
      state = { ...state, step, toolCalls: call };
      const record = recordStep(recordDeps, run, state, resumed);
      await record.write();
      // What the next job loads: the count went through the seal's JSON and the schema.
      state = JSON.parse(JSON.stringify(state)) as RunState;
      expect(runStateProblem(state)).toBeUndefined();
    }
    const transcript = readTranscript([...stored.values()], run);
    expect(transcript.problems).toEqual([]);
    const kinds = transcript.entries.map((entry) => entry.kind);
    expect(kinds.filter((kind) => kind === 'approval')).toHaveLength(MAX_RECORDED_APPROVALS);
    const cuts = transcript.entries.filter((entry) => entry.kind === 'cut');
    const cutStep = Math.ceil((MAX_RECORDED_APPROVALS + 1) / 64);
    expect(cuts).toEqual([
      expect.objectContaining({
        key: cutKey(cutStep),
        message: expect.stringContaining(`from approval s${cutStep}-c${MAX_RECORDED_APPROVALS + 1} on`),
      }),
    ]);
    expect(transcript.entries).toHaveLength(MAX_RECORDED_APPROVALS + 1);
    expect(state.recordedApprovals).toBe(MAX_RECORDED_APPROVALS + 1);
    expect(warnings).toEqual([]);
  });
});

describe('stepEntry with calls that share an id', () => {
  // One answer's calls: t twice, then u (gated by spec.approval), then u again after it.
  const write = { toolCallId: 't', toolName: 'write_file', input: { path: 'dup.txt', content: 'written\n' } };
  const read = { toolCallId: 't', toolName: 'read_file', input: { path: 'dup.txt' } };
  const gated = { toolCallId: 'u', toolName: 'bash', input: { command: 'cat dup.txt' } };
  const again = { toolCallId: 'u', toolName: 'bash', input: { command: 'rm dup.txt' } };
  const wrote: ToolResultRecord = { toolCallId: 't', toolName: 'write_file', ok: true, text: '{"path":"dup.txt","bytes":8}' };
  const ran: ToolResultRecord = { toolCallId: 'u', toolName: 'bash', ok: true, text: 'written' };
  const state = { step: 1, messages: [] } as unknown as RunState;
  const inFlight = (calls: InFlightStep['calls'], results: ToolResultRecord[], earlier: ToolResultRecord[] = []): InFlightStep => ({
    calls,
    results,
    earlier,
    hadToolCalls: true,
    toolNames: calls.map((call) => call.toolName),
    text: '',
    resumed: earlier.length > 0,
  });
  const shown = (entry: ReturnType<typeof stepEntry>) =>
    entry.calls!.map((call) => [call.tool, call.result?.ok, call.result?.output.text.slice(0, 22), call.waiting?.approvalId]);

  it('gives the call that ran its own result and the repeated one its DUPLICATE_TOOL_CALL_ID error', () => {
    // As the step leaves it: only the write ran, so only its result is kept.
    const entry = stepEntry(state, inFlight([write, read], [wrote]), now);
    expect(shown(entry)).toEqual([
      ['write_file', true, '{"path":"dup.txt","byt', undefined],
      ['read_file', false, 'DUPLICATE_TOOL_CALL_ID', undefined],
    ]);
  });

  it('parked on a call: the calls before it paired so, the waiting one marked, and the one reusing its id after it neither', () => {
    const parked = {
      ...state,
      pendingApproval: {
        id: 's1-c3',
        toolCallId: 'u',
        toolName: 'bash',
        input: gated.input,
        requestedAt: now.toISOString(),
        // As runCallsUntilApproval saves it: the repeated call's answer after the write's result, with its id.
        results: [wrote, repeatedIdResult(read)],
        remaining: [again],
      },
    } as RunState;
    const entry = stepEntry(parked, inFlight([write, read, gated, again], [wrote]), now);
    expect(shown(entry)).toEqual([
      ['write_file', true, '{"path":"dup.txt","byt', undefined],
      ['read_file', false, 'DUPLICATE_TOOL_CALL_ID', undefined],
      ['bash', undefined, undefined, 's1-c3'],
      ['bash', undefined, undefined, undefined],
    ]);
  });

  it("a resume: the answered call's result, and the call after it reusing its id answered DUPLICATE_TOOL_CALL_ID, not with that result", () => {
    const resumed: InFlightStep = {
      ...inFlight([again], [], [wrote, repeatedIdResult(read), ran]),
      record: {
        startedAt: now.toISOString(),
        answered: gated,
        approval: { id: 's1-c3', tool: 'bash', decision: 'approve', requestedAt: now.toISOString(), answeredAt: now.toISOString() },
      },
    };
    expect(shown(stepEntry(state, resumed, now))).toEqual([
      ['bash', true, 'written', undefined],
      ['bash', false, 'DUPLICATE_TOOL_CALL_ID', undefined],
    ]);
  });
});
