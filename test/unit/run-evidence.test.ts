// What an eval grades a run on, read from its transcript (evals/run-evidence.ts): each tool call
// once, with its last word (a call parked for approval comes back with its result in the
// resume's entry), and a later step's call that reuses an id counted as the other call it is.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { runEvidence } from '../../operator/src/evals/run-evidence.ts';
import type { TranscriptEntry, TranscriptToolCall } from '../../operator/src/record/transcript-entry.ts';

const run = { metadata: { name: 'r', namespace: 'ns', uid: 'u' }, status: { phase: 'Succeeded', steps: 2 } } as CodingRun;
const call = (id: string, ok?: boolean): TranscriptToolCall => ({
  id,
  tool: 'bash',
  input: { text: '{}' },
  ...(ok === undefined ? {} : { result: { ok, output: { text: '' } } }),
});
const entry = (key: string, step: number, calls: TranscriptToolCall[]): TranscriptEntry => ({
  key,
  kind: 'step',
  step,
  at: '2026-12-05T00:00:00Z',
  calls,
});

describe('runEvidence: tool calls', () => {
  it('keeps the last word of a call resumed after approval, and a reused id in a later step as a call of its own', () => {
    const evidence = runEvidence(run, {
      problems: [],
      entries: [
        entry('s000001', 1, [call('call_0')]),
        entry('s000001-c000001', 1, [call('call_0', true)]),
        entry('s000002', 2, [call('call_0', false)]),
      ],
    });
    expect(evidence.calls).toEqual([
      { tool: 'bash', ok: true },
      { tool: 'bash', ok: false },
    ]);
  });
});
