// Tool calls of one step that reuse an earlier call's id: they do not run, and are answered
// with a tool error made only from the saved calls, so a redone step gives the same answer.
// Kept apart from running the calls (run-tool-calls.ts) because recording a step
// (record-step.ts) pairs results with calls by the same rule.
import type { PendingToolCall, ToolResultRecord } from './run-state.ts';

/**
 * Positions in `calls` of the calls whose tool call id an earlier call of the step already
 * has (one in `earlier`, or one before it in `calls`). An endpoint may give two calls of one
 * answer the same id, and everything after the answer tells calls apart by id: the results a
 * redone step finds done, the toolbox's call journal (tool-execution.ts journalKey, where the
 * second call's entry would replace the first's, so a redo ran the first again), the tool
 * message the provider pairs with its calls. And the ai SDK finds a call's parts by id too, so
 * generateText hands the second call on as a copy of the first. Keying results by position
 * would fix only the first of these and run that copy, so such a call does not run and is
 * answered with a tool error instead. The answer depends only on the saved calls and earlier
 * results, so a redone step gives the same one.
 */
export function repeatedCallIds(calls: readonly PendingToolCall[], earlier: readonly ToolResultRecord[]): Set<number> {
  const seen = new Set(earlier.map((result) => result.toolCallId));
  const repeated = new Set<number>();
  calls.forEach((call, index) => {
    if (seen.has(call.toolCallId)) repeated.add(index);
    seen.add(call.toolCallId);
  });
  return repeated;
}

/** The tool error answering a call whose id an earlier call of the step has; it did not run. */
export function repeatedIdResult(call: PendingToolCall): ToolResultRecord {
  const id = JSON.stringify(call.toolCallId.length > 80 ? `${call.toolCallId.slice(0, 80)}…` : call.toolCallId);
  return {
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    ok: false,
    text: `DUPLICATE_TOOL_CALL_ID: an earlier tool call of this step has the id ${id}, so this one did not run (each call needs its own id to be told apart). Make it again in your next step if you still need it.`,
  };
}
