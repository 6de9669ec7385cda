// When the loop stops, as pure predicates over what the step worker knows after a step.
// Order matters: an answer without tool calls finishes the run even on the last allowed
// step; the deadline outranks the budgets because it is the harder limit.

import type { TokenUsage } from './usage-accounting.ts';

export interface StopInput {
  /** Steps (model calls) made so far, this one included. */
  readonly steps: number;
  /**
   * Model calls of steps that failed before they were saved and were asked again
   * (workers/spent-on-unsaved-step.ts): spec.budget.maxSteps bounds model calls, and counts them too.
   */
  readonly discardedModelCalls?: number | undefined;
  /** Whether the last model answer asked for tools. */
  readonly lastStepHadToolCalls: boolean;
  /**
   * Why the provider ended the last answer early, when it did (answerCutOff): such an answer
   * without tool calls is not a final one, and one with them was cut inside its last call.
   */
  readonly lastAnswerCutOff?: AnswerCutOff | undefined;
  readonly usage: TokenUsage;
  readonly budget: { readonly maxSteps: number; readonly maxTokens?: number | undefined };
  /** Milliseconds since the epoch. */
  readonly startedAt: number;
  readonly timeoutMs: number;
  readonly now: number;
  /** Steps in a row, up to this one, whose tool calls were all unusable (bad arguments, a tool not offered). */
  readonly unusableToolCallSteps?: number;
  /** What was wrong with the last unusable call, for the message. */
  readonly lastUnusableToolCall?: string | undefined;
}

/**
 * Steps in a row with nothing but unusable tool calls before the run gives up on the model.
 * Each such call goes back to the model as a tool error, so one or two are a slip it can
 * correct; a model that keeps at it cannot do tool calling, and would spend the whole
 * step budget (and the money) on nothing.
 */
export const UNUSABLE_TOOL_CALL_STEPS_LIMIT = 3;

export type StopDecision =
  | { readonly stop: false }
  | { readonly stop: true; readonly outcome: 'finished' }
  | { readonly stop: true; readonly outcome: 'failed'; readonly reason: StopReason; readonly message: string };

export type StopReason = 'BudgetExceeded' | 'DeadlineExceeded' | 'ModelResponseInvalid';

export function answeredWithoutToolCalls(input: Pick<StopInput, 'lastStepHadToolCalls'>): boolean {
  return !input.lastStepHadToolCalls;
}

/** Ends of an answer the provider made, not the model: cut at the output limit, or withheld by a content filter. */
export type AnswerCutOff = 'length' | 'content-filter';

/**
 * Why an answer ended early, from the SDK's finishReason; undefined for a model that finished.
 * Without tool calls such an answer was taken for the final one, and a run ended Succeeded on
 * half a sentence or an empty filtered reply. With tool calls the step runs them, but one cut
 * at the output limit ended inside its last call, whose arguments did not parse: when the model
 * keeps doing that, the failure names the output limit, not tool calling (decideStop).
 */
export function answerCutOff(finishReason: string, hadToolCalls: boolean): AnswerCutOff | undefined {
  if (finishReason === 'length') return 'length';
  return !hadToolCalls && finishReason === 'content-filter' ? finishReason : undefined;
}

export function deadlinePassed(input: Pick<StopInput, 'startedAt' | 'timeoutMs' | 'now'>): boolean {
  return input.now - input.startedAt >= input.timeoutMs;
}

export function stepBudgetSpent(input: Pick<StopInput, 'steps' | 'discardedModelCalls' | 'budget'>): boolean {
  return input.steps + (input.discardedModelCalls ?? 0) >= input.budget.maxSteps;
}

export function modelKeepsSendingUnusableToolCalls(input: Pick<StopInput, 'unusableToolCallSteps'>): boolean {
  return (input.unusableToolCallSteps ?? 0) >= UNUSABLE_TOOL_CALL_STEPS_LIMIT;
}

/**
 * Compares the total, estimated figures included: a call that reported no usage counts the
 * worker's estimate (usage-accounting.ts), or an endpoint that reports none would never reach
 * the budget.
 */
export function tokenBudgetSpent(input: Pick<StopInput, 'usage' | 'budget'>): boolean {
  return input.budget.maxTokens !== undefined && input.usage.totalTokens >= input.budget.maxTokens;
}

/** The run's own limits that forbid another model call. */
export type SpentLimit = 'timeout' | 'maxSteps' | 'maxTokens';

/** What a step knows of its limits before it asks the model: no answer yet. */
export type NextCallInput = Pick<StopInput, 'steps' | 'discardedModelCalls' | 'usage' | 'budget' | 'startedAt' | 'timeoutMs' | 'now'>;

/**
 * The first of the run's own limits that is spent, in decideStop's order; undefined when the
 * model may be asked again. decideStop stops on it, and so does the step worker before each
 * call; verification asks it before it hands a failure back for another step, so it never
 * offers a retry that the step it needs would refuse (a retry at the last step, with a
 * discarded call counted, ended the run BudgetExceeded with nothing published).
 */
export function spentLimit(input: NextCallInput): SpentLimit | undefined {
  if (deadlinePassed(input)) return 'timeout';
  if (stepBudgetSpent(input)) return 'maxSteps';
  if (tokenBudgetSpent(input)) return 'maxTokens';
  return undefined;
}

export function decideStop(input: StopInput): StopDecision {
  if (answeredWithoutToolCalls(input) && input.lastAnswerCutOff) {
    return {
      stop: true,
      outcome: 'failed',
      reason: 'ModelResponseInvalid',
      message:
        input.lastAnswerCutOff === 'length'
          ? `The model's answer at step ${input.steps} was cut off at its output limit before it finished; the partial diff is kept. Use a model with a larger output limit, or narrow the task.`
          : `The provider withheld the model's answer at step ${input.steps} (content filter); the partial diff is kept.`,
    };
  }
  if (answeredWithoutToolCalls(input)) return { stop: true, outcome: 'finished' };
  const limit = spentLimit(input);
  if (limit === 'timeout') {
    return {
      stop: true,
      outcome: 'failed',
      reason: 'DeadlineExceeded',
      message: `The run reached spec.budget.timeout (${Math.round(input.timeoutMs / 1000)}s) after ${input.steps} step(s); the partial diff is kept. Raise the timeout or narrow the task.`,
    };
  }
  if (modelKeepsSendingUnusableToolCalls(input)) {
    const last = input.lastUnusableToolCall ? ` (last: ${input.lastUnusableToolCall})` : '';
    return {
      stop: true,
      outcome: 'failed',
      reason: 'ModelResponseInvalid',
      message:
        input.lastAnswerCutOff === 'length'
          ? `The model answered ${input.unusableToolCallSteps} steps in a row with only tool calls that could not be run${last}, the last answer cut off at its output limit inside a tool call's arguments, though it was told so; the partial diff is kept. ` +
            'The run sets no output limit of its own: use a model or endpoint with a larger output limit, or narrow the task so no file must be written whole in one answer.'
          : `The model answered ${input.unusableToolCallSteps} steps in a row with only tool calls that could not be run, though each came back to it as a tool error${last}; the partial diff is kept. Use a model that supports tool calling.`,
    };
  }
  if (limit === 'maxSteps') {
    return {
      stop: true,
      outcome: 'failed',
      reason: 'BudgetExceeded',
      message: `The run used all ${input.budget.maxSteps} steps of spec.budget.maxSteps${discardedCalls(input.discardedModelCalls)} without finishing; the partial diff is kept. Raise maxSteps or narrow the task.`,
    };
  }
  if (limit === 'maxTokens') {
    return {
      stop: true,
      outcome: 'failed',
      reason: 'BudgetExceeded',
      message: `The run used ${tokensUsed(input.usage)}, reaching spec.budget.maxTokens (${input.budget.maxTokens}); the partial diff is kept. Raise maxTokens or narrow the task.`,
    };
  }
  return { stop: false };
}

function discardedCalls(calls: number | undefined): string {
  return calls ? ` (${calls} of them model calls asked again after their step failed before it was saved)` : '';
}

function tokensUsed(usage: TokenUsage): string {
  return usage.complete
    ? `${usage.totalTokens} tokens`
    : `about ${usage.totalTokens} tokens (the provider did not report them all; the rest are the operator's estimate)`;
}
