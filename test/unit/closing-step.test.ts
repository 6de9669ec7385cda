// A run past MAX_RECORDED_STEPS: its steps stop at the cut, and how it ended (recordFailure) is
// keyed after the cut, so `logs` reads step 500, the cut, then the end, not the end before the
// cut that says later steps were left out. Written through local mode's writer and read back as
// `kubectl codingrun logs` reads it.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { memoryTranscriptWriter } from '../../operator/src/cli/local/memory-transcript-writer.ts';
import type { MemoryKubeGateway } from '../../operator/src/cli/local/memory-kube-gateway.ts';
import { readTranscript } from '../../operator/src/record/transcript-chunks.ts';
import {
  MAX_RECORDED_STEPS,
  closingStep,
  cutKey,
  stepKey,
  verifyKey,
  type TranscriptEntry,
} from '../../operator/src/record/transcript-entry.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { recordFailure } from '../../operator/src/workers/record-step.ts';
import { emptyUsage } from '../../operator/src/agent/usage-accounting.ts';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { SandboxError } from '../../operator/src/sandbox/sandbox-error.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { verifyWork } from '../../operator/src/workers/verify-work.ts';
import type { TranscriptRun } from '../../operator/src/workers/transcript-writer.ts';

const run = { metadata: { name: 'long', namespace: 'agents', uid: '0b6f3c1e-3a4b-4c5d-8e9f-0a1b2c3d4e5f' } } as TranscriptRun & CodingRun;
const now = new Date('2026-12-07T12:00:00.000Z');

describe('closing entries of a run past the recorded steps', () => {
  it('keys the end of a run that failed at step 620 after the last recorded step and the cut', async () => {
    const stored = new Map<string, V1ConfigMap>();
    const gateway = {
      configMap: (_namespace: string, name: string) => stored.get(name),
      putConfigMap: (configMap: V1ConfigMap) => stored.set(configMap.metadata!.name!, configMap),
    } as unknown as MemoryKubeGateway;
    const transcript = memoryTranscriptWriter(gateway, () => undefined);
    const at = now.toISOString();
    const last: TranscriptEntry = { key: stepKey(MAX_RECORDED_STEPS), kind: 'step', step: MAX_RECORDED_STEPS, at };
    const cut: TranscriptEntry = { key: cutKey(MAX_RECORDED_STEPS + 1), kind: 'cut', step: MAX_RECORDED_STEPS + 1, at, message: 'cut' };
    await transcript.append(run, [last, cut]);
    const deps = { transcript, now: () => now, logger: { warn: () => undefined } } as unknown as Pick<
      AgentDependencies,
      'transcript' | 'now' | 'logger'
    >;
    await recordFailure(deps, run, 620, 'BudgetExceeded', 'out of tokens');

    const read = readTranscript([...stored.values()], run);
    expect(read.problems).toEqual([]);
    expect(read.entries.map((entry) => [entry.key, entry.kind])).toEqual([
      ['s000500', 'step'],
      ['s000501-cut', 'cut'],
      ['s000501-end', 'end'],
    ]);
    expect(read.entries.at(-1)!.step).toBe(MAX_RECORDED_STEPS + 1);
  });

  it('keys the check of a run that ran 620 steps after the cut, at its step', async () => {
    const transcript: TranscriptEntry[] = [];
    const deps = {
      sandboxes: {
        for: () => ({
          call: async () => {
            throw new SandboxError('TIMEOUT', 'the toolbox did not answer');
          },
        }),
      },
      transcript: { append: async (_run: unknown, entries: TranscriptEntry[]) => void transcript.push(...entries) },
      states: { save: async () => {} },
      events: { record: async () => {} },
      queue: { step: async () => {} },
      metrics: { namespaceTokensToday: { set: () => {} } },
      logger: { info: () => {}, warn: () => {}, error: () => {} },
      now: () => now,
    } as unknown as AgentDependencies;
    const checked = {
      metadata: { name: 'long', namespace: 'agents', uid: 'uid-1' },
      spec: {
        budget: { maxSteps: 1000, timeout: '1h' },
        verify: { command: 'npm test', required: true, retries: 0, protect: [], timeout: '10m' },
      },
    } as unknown as ParsedCodingRun;
    const state = {
      step: 620,
      discardedModelCalls: 0,
      usage: emptyUsage(),
      startedAt: now.getTime() - 60_000,
      messages: [{ role: 'assistant', content: 'done' }],
      finalText: 'done',
      stage: 'finalizing',
    } as unknown as RunState;
    await verifyWork(deps, checked, state);
    expect(transcript.map((entry) => [entry.key, entry.step])).toEqual([['s000501-v000001', MAX_RECORDED_STEPS + 1]]);
  });

  it("keys a check after the cut's step past the bound and at the run's own step within it", () => {
    expect(verifyKey(closingStep(620), 1)).toBe('s000501-v000001');
    expect(verifyKey(closingStep(MAX_RECORDED_STEPS), 2)).toBe('s000500-v000002');
    expect(verifyKey(closingStep(12), 1)).toBe('s000012-v000001');
  });
});
