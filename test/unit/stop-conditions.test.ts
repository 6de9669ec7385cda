import { describe, expect, it } from 'vitest';
import { UNUSABLE_TOOL_CALL_STEPS_LIMIT, answerCutOff, decideStop, type StopInput } from '../../operator/src/agent/stop-conditions.ts';
import { emptyUsage, usageOfModelCall } from '../../operator/src/agent/usage-accounting.ts';

const base: StopInput = {
  steps: 3,
  lastStepHadToolCalls: true,
  usage: { ...emptyUsage(), totalTokens: 5_000 },
  budget: { maxSteps: 40, maxTokens: 10_000 },
  startedAt: 0,
  timeoutMs: 60_000,
  now: 30_000,
};

describe('decideStop', () => {
  it('continues while the model calls tools within every budget', () => {
    expect(decideStop(base)).toEqual({ stop: false });
  });

  it('finishes when the model answers without tool calls, even on the last allowed step', () => {
    expect(decideStop({ ...base, lastStepHadToolCalls: false, steps: 40 })).toEqual({ stop: true, outcome: 'finished' });
  });

  it('fails with ModelResponseInvalid, not Succeeded, when the provider cut the answer off or withheld it', () => {
    const cut = decideStop({ ...base, lastStepHadToolCalls: false, lastAnswerCutOff: 'length' });
    expect(cut).toMatchObject({ stop: true, outcome: 'failed', reason: 'ModelResponseInvalid' });
    expect(cut.stop && cut.outcome === 'failed' && cut.message).toContain('cut off at its output limit');
    const filtered = decideStop({ ...base, lastStepHadToolCalls: false, lastAnswerCutOff: 'content-filter' });
    expect(filtered.stop && filtered.outcome === 'failed' && filtered.message).toContain('content filter');
  });

  // A tool call cut at the output limit was reported as a model that cannot call tools.
  it('takes a cut-off for length and content-filter, and for length from an answer with tool calls too', () => {
    expect(answerCutOff('length', false)).toBe('length');
    expect(answerCutOff('content-filter', false)).toBe('content-filter');
    expect(answerCutOff('length', true)).toBe('length');
    expect(answerCutOff('content-filter', true)).toBeUndefined();
    expect(decideStop({ ...base, lastStepHadToolCalls: true, lastAnswerCutOff: 'length' })).toEqual({ stop: false });
    expect(['stop', 'tool-calls', 'other', 'error'].map((reason) => answerCutOff(reason, false))).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('fails with BudgetExceeded when maxSteps is used up', () => {
    const decision = decideStop({ ...base, steps: 40 });
    expect(decision).toMatchObject({ stop: true, outcome: 'failed', reason: 'BudgetExceeded' });
    expect(decision.stop && decision.outcome === 'failed' && decision.message).toContain('maxSteps');
  });

  it('counts model calls of steps that failed before they were saved toward maxSteps, and says so', () => {
    expect(decideStop({ ...base, steps: 30, discardedModelCalls: 9 })).toEqual({ stop: false });
    const decision = decideStop({ ...base, steps: 30, discardedModelCalls: 10 });
    expect(decision).toMatchObject({ stop: true, outcome: 'failed', reason: 'BudgetExceeded' });
    expect(decision.stop && decision.outcome === 'failed' && decision.message).toContain('10 of them model calls asked again');
  });

  it('fails with BudgetExceeded when the reported tokens reach maxTokens', () => {
    expect(decideStop({ ...base, usage: { ...emptyUsage(), totalTokens: 10_000 } })).toMatchObject({ reason: 'BudgetExceeded' });
    expect(decideStop({ ...base, budget: { maxSteps: 40 }, usage: { ...emptyUsage(), totalTokens: 10_000_000 } })).toEqual({ stop: false });
  });

  // An endpoint that omits usage spent without end under maxTokens: its calls count the worker's estimate.
  it('fails with BudgetExceeded on an estimated total too, saying it is partly the estimate', () => {
    const estimated = usageOfModelCall(undefined, { inputTokens: 9_000, outputTokens: 1_000 });
    const decision = decideStop({ ...base, usage: estimated });
    expect(decision).toMatchObject({ stop: true, outcome: 'failed', reason: 'BudgetExceeded' });
    expect(decision.stop && decision.outcome === 'failed' && decision.message).toContain(
      "used about 10000 tokens (the provider did not report them all; the rest are the operator's estimate)",
    );
  });

  it('fails with DeadlineExceeded once the timeout has passed, ahead of the budgets', () => {
    expect(decideStop({ ...base, now: 60_000, steps: 40 })).toMatchObject({ outcome: 'failed', reason: 'DeadlineExceeded' });
    expect(decideStop({ ...base, now: 59_999 })).toEqual({ stop: false });
  });

  it('fails with ModelResponseInvalid when the model sends only unusable tool calls step after step, saying what was wrong', () => {
    expect(decideStop({ ...base, unusableToolCallSteps: UNUSABLE_TOOL_CALL_STEPS_LIMIT - 1 })).toEqual({ stop: false });
    const decision = decideStop({
      ...base,
      unusableToolCallSteps: UNUSABLE_TOOL_CALL_STEPS_LIMIT,
      lastUnusableToolCall: 'read_file: JSON parsing failed',
    });
    expect(decision).toMatchObject({ stop: true, outcome: 'failed', reason: 'ModelResponseInvalid' });
    expect(decision.stop && decision.outcome === 'failed' && decision.message).toContain('(last: read_file: JSON parsing failed)');
    expect(decision.stop && decision.outcome === 'failed' && decision.message).toContain('Use a model that supports tool calling');
    // The deadline is still the harder limit.
    expect(decideStop({ ...base, now: 60_000, unusableToolCallSteps: 5 })).toMatchObject({ reason: 'DeadlineExceeded' });
  });

  it('names the output limit, not tool calling, when the last of those answers was cut off inside a call', () => {
    const decision = decideStop({
      ...base,
      unusableToolCallSteps: UNUSABLE_TOOL_CALL_STEPS_LIMIT,
      lastAnswerCutOff: 'length',
      lastUnusableToolCall: 'write_file: Invalid input for tool write_file: JSON parsing failed',
    });
    expect(decision).toMatchObject({ stop: true, outcome: 'failed', reason: 'ModelResponseInvalid' });
    const message = decision.stop && decision.outcome === 'failed' ? decision.message : '';
    expect(message).toContain('cut off at its output limit');
    expect(message).toContain('larger output limit');
    expect(message).toContain('(last: write_file: Invalid input for tool write_file: JSON parsing failed)');
    expect(message).not.toContain('tool calling');
  });
});
