// workers/record-step.ts: a step's transcript entry is cut to the transcript's field bounds as
// it is built. While it trails the step's hand-over it is kept in the run's state
// (state.trailing) through every save; uncut, it held each call's whole input and result.
import { describe, expect, it } from 'vitest';
import { encodeEntry } from '../../operator/src/record/transcript-chunks.ts';
import { DEFAULT_BOUNDS, recordedCall } from '../../operator/src/record/transcript-entry.ts';
import { stepEntry } from '../../operator/src/workers/record-step.ts';
import type { InFlightStep, RunState } from '../../operator/src/workers/run-state.ts';

const now = new Date('2026-12-06T12:00:00.000Z');

describe('stepEntry', () => {
  it("cuts each call's input and result to the transcript's bounds, and encodes as the uncut entry did", () => {
    const content = 'x'.repeat(1_000_000);
    const state = {
      version: 2,
      uid: '0b6f3c1e-3a4b-4c5d-8e9f-0a1b2c3d4e5f',
      namespace: 'agents',
      name: 'writer',
      stage: 'stepping',
      step: 3,
      toolCalls: 1,
      messages: [],
      usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, reasoningTokens: 0, totalTokens: 0, complete: true },
      filesTouched: { read: [], changed: [] },
      startedAt: 0,
    } satisfies RunState;
    const inFlight: InFlightStep = {
      calls: [{ toolCallId: 'c1', toolName: 'write_file', input: { path: 'big.txt', content } }],
      results: [{ toolCallId: 'c1', toolName: 'write_file', ok: true, text: content }],
      earlier: [],
      hadToolCalls: true,
      toolNames: ['write_file'],
      text: content,
      resumed: false,
      record: { startedAt: now.toISOString() },
    };
    const entry = stepEntry(state, inFlight, now);
    const [call] = entry.calls!;
    expect(Buffer.byteLength(call!.input.text)).toBeLessThanOrEqual(DEFAULT_BOUNDS.input);
    expect(call!.input.cutFrom).toBe(JSON.stringify(inFlight.calls[0]!.input).length);
    expect(Buffer.byteLength(call!.result!.output.text)).toBeLessThanOrEqual(DEFAULT_BOUNDS.output);
    expect(call!.result!.output.cutFrom).toBe(content.length);
    expect(Buffer.byteLength(entry.text!.text)).toBeLessThanOrEqual(DEFAULT_BOUNDS.text);
    expect(JSON.stringify(entry).length).toBeLessThan(20_000);
    // What the transcript stores is the same whether the entry was cut here or by the writer.
    const uncut = { ...entry, text: { text: content }, calls: [recordedCall(inFlight.calls[0]!, inFlight.results[0])] };
    expect(encodeEntry(entry).value.equals(encodeEntry(uncut).value)).toBe(true);
  });
});
