// When the loop stops, as pure predicates over what the step worker knows after a step.
// Order matters: an answer without tool calls finishes the run even on the last allowed
// step; the deadline outranks the budgets because it is the harder limit.

import type { TokenUsage } from './usage-accounting.ts';

export interface StopInput {
  /** Steps (model calls) made so far, this one included. */
  readonly steps: number;
  /** Whether the last model answer asked for tools. */
  readonly lastStepHadToolCalls: boolean;
  readonly usage: TokenUsage;
  readonly budget: { readonly maxSteps: number; readonly maxTokens?: number | undefined };
  /** Milliseconds since the epoch. */
  readonly startedAt: number;
  readonly timeoutMs: number;
  readonly now: number;
}

export type StopDecision =
  | { readonly stop: false }
  | { readonly stop: true; readonly outcome: 'finished' }
  | { readonly stop: true; readonly outcome: 'failed'; readonly reason: 'BudgetExceeded' | 'DeadlineExceeded'; readonly message: string };

export function answeredWithoutToolCalls(input: Pick<StopInput, 'lastStepHadToolCalls'>): boolean {
  return !input.lastStepHadToolCalls;
}

export function deadlinePassed(input: Pick<StopInput, 'startedAt' | 'timeoutMs' | 'now'>): boolean {
  return input.now - input.startedAt >= input.timeoutMs;
}

export function stepBudgetSpent(input: Pick<StopInput, 'steps' | 'budget'>): boolean {
  return input.steps >= input.budget.maxSteps;
}

/** Compares the reported total; calls that reported nothing cannot be counted (see usage.complete). */
export function tokenBudgetSpent(input: Pick<StopInput, 'usage' | 'budget'>): boolean {
  return input.budget.maxTokens !== undefined && input.usage.totalTokens >= input.budget.maxTokens;
}

export function decideStop(input: StopInput): StopDecision {
  if (answeredWithoutToolCalls(input)) return { stop: true, outcome: 'finished' };
  if (deadlinePassed(input)) {
    return {
      stop: true,
      outcome: 'failed',
      reason: 'DeadlineExceeded',
      message: `The run reached spec.budget.timeout (${Math.round(input.timeoutMs / 1000)}s) after ${input.steps} step(s); the partial diff is kept. Raise the timeout or narrow the task.`,
    };
  }
  if (stepBudgetSpent(input)) {
    return {
      stop: true,
      outcome: 'failed',
      reason: 'BudgetExceeded',
      message: `The run used all ${input.budget.maxSteps} steps of spec.budget.maxSteps without finishing; the partial diff is kept. Raise maxSteps or narrow the task.`,
    };
  }
  if (tokenBudgetSpent(input)) {
    return {
      stop: true,
      outcome: 'failed',
      reason: 'BudgetExceeded',
      message: `The run used ${input.usage.totalTokens} tokens, reaching spec.budget.maxTokens (${input.budget.maxTokens}); the partial diff is kept. Raise maxTokens or narrow the task.`,
    };
  }
  return { stop: false };
}
