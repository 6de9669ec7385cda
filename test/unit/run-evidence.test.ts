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

describe('runEvidence: calls that share an id in one step', () => {
  const named = (tool: string, id: string, ok?: boolean): TranscriptToolCall => ({ ...call(id, ok), tool });
  const kinded = (kind: TranscriptEntry['kind'], key: string, calls: TranscriptToolCall[]) => ({ ...entry(key, 1, calls), kind });

  it('keeps each call of one answer, the one that ran and the one answered DUPLICATE_TOOL_CALL_ID', () => {
    const evidence = runEvidence(run, {
      problems: [],
      entries: [entry('s000001', 1, [named('write_file', 't', true), named('read_file', 't', false)])],
    });
    expect(evidence.calls).toEqual([
      { tool: 'write_file', ok: true },
      { tool: 'read_file', ok: false },
    ]);
  });

  it("takes a resume's calls for the step's last ones: the answered call and those after it, in turn", () => {
    const evidence = runEvidence(run, {
      problems: [],
      entries: [
        // t twice before the call waiting for approval (u), and u again after it.
        kinded('step', 's000001', [named('write_file', 't', true), named('read_file', 't', false), named('bash', 'u'), named('bash', 'u')]),
        // Approved, and the one after it answered DUPLICATE_TOOL_CALL_ID.
        kinded('approval', 's000001-c000003', [named('bash', 'u', true), named('bash', 'u', false)]),
      ],
    });
    expect(evidence.calls).toEqual([
      { tool: 'write_file', ok: true },
      { tool: 'read_file', ok: false },
      { tool: 'bash', ok: true },
      { tool: 'bash', ok: false },
    ]);
    // Answers in a row (each resume waits for the next call), and a step whose own entry is missing.
    const chained = runEvidence(run, {
      problems: [],
      entries: [
        kinded('step', 's000001', [named('read_file', 'a', true), named('bash', 'b'), named('bash', 'c')]),
        kinded('approval', 's000001-c000002', [named('bash', 'b', false), named('bash', 'c')]),
        kinded('approval', 's000001-c000003', [named('bash', 'c', true)]),
        { ...kinded('approval', 's000002-c000005', [named('bash', 'd', true)]), step: 2 },
      ],
    });
    expect(chained.calls).toEqual([
      { tool: 'read_file', ok: true },
      { tool: 'bash', ok: false },
      { tool: 'bash', ok: true },
      { tool: 'bash', ok: true },
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
