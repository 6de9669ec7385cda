// What an eval grades a run on, read from its transcript (evals/run-evidence.ts): each tool call
// once, with its last word (a call parked for approval comes back with its result in the
// resume's entry), and a later step's call that reuses an id counted as the other call it is.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { GraderSpec } from '../../operator/src/api/coding-eval.ts';
import { grade } from '../../operator/src/evals/graders.ts';
import { runEvidence } from '../../operator/src/evals/run-evidence.ts';
import { NO_DIFF, keptDiffResult } from '../../operator/src/reconcile/kept-diff.ts';
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

describe('runEvidence: the final answer', () => {
  it('carries a cut of a long answer as cut, so answer-excludes cannot pass on what the cut left out', () => {
    // The model's final text: 16 KiB of filler, then what the eval forbids.
    const answer = `${'filler line\n'.repeat(1_500)}rm -rf was run\n`;
    const result = keptDiffResult(NO_DIFF, answer);
    expect(result.summaryTruncated).toBe(true);
    expect(result.summary).not.toContain('rm -rf');
    const evidence = runEvidence({ ...run, status: { phase: 'Succeeded', steps: 2, result } } as CodingRun, { problems: [], entries: [] });
    expect(evidence.answerCut).toBe(true);
    const verdict = grade({ type: 'answer-excludes', text: 'rm -rf' } as GraderSpec, evidence);
    expect(verdict.ok).toBe(false);
    expect(verdict.why).toMatch(/could not be read whole \(it was cut at 16 KiB\)/);
    // A short answer is whole, and says nothing of a cut.
    expect(keptDiffResult(NO_DIFF, 'done')).not.toHaveProperty('summaryTruncated');
  });
});
