// Running one step's tool calls in the sandbox. Independent calls run in parallel; calls
// on the same file (however spelt), and all shell calls, keep the order the model gave them
// (tool-call-ordering.ts). Every result goes back to the model as text bounded to 64 KiB, and
// an image read_file returned as an image beside that text when the model accepts images
// (agent/image-result.ts); a tool error is a result too, never a failed run, and so is an
// answer too large to carry. Only a broken sandbox (SandboxError) propagates, and it ends
// the step's other calls (executeToolCalls).
import type { ModelMessage, ToolResultPart } from 'ai';
import { boundToolResult } from '../agent/bound-tool-result.ts';
import { toolResultText } from '../agent/fit-tool-result.ts';
import { decideImageResult, imageToSend, isImageRead } from '../agent/image-result.ts';
import type { Sandbox, ToolResponse } from '../sandbox/sandbox.ts';
import { SandboxError } from '../sandbox/sandbox-error.ts';
import { timerDelay } from '../timer-delay.ts';
import type { PendingToolCall, ToolResultRecord } from './run-state.ts';
import { orderingKey } from './tool-call-ordering.ts';

/**
 * The name a call goes to the toolbox under, so a step redone after a worker died gets the
 * toolbox's journaled answer instead of editing twice. The step keeps it unique when a model
 * reuses a tool call id in a later step.
 */
export const journalKey = (step: number, call: PendingToolCall) => `s${step}:${call.toolCallId}`;

/** Told of every finished call, for metrics. */
export type ToolCallObserver = (tool: string, outcome: 'ok' | 'error', seconds: number) => void;

/** How a step shows images: whether the model takes them, and how many this step has shown so far. */
export interface ImageShowing {
  readonly modelAcceptsImages: boolean;
  shown: number;
}

/**
 * Runs `work` with a signal that aborts at the run's deadline (budget.timeout, `msLeft` from
 * now). A call still running then is answered TIMEOUT (DEADLINE_RESULT) instead of holding a
 * worker up to the 30 minutes a bash command may take: the step ends, and the next one ends
 * the run DeadlineExceeded with its partial diff. The command may still run in the sandbox
 * meanwhile; a call not sent yet (the rest of its chain, one whose session was still starting)
 * is answered TIMEOUT without being sent. The timer goes with the work, so steps leave no timers
 * behind them.
 */
export async function withRunDeadline<T>(msLeft: number, work: (deadline: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  // Passed already (an approval answered after it, a retry): aborted before the first call is
  // sent, not a timer's tick after, by when the first call of each chain has gone.
  if (msLeft <= 0) controller.abort();
  const timer = setTimeout(() => controller.abort(), timerDelay(Math.max(1, msLeft)));
  try {
    return await work(controller.signal);
  } finally {
    clearTimeout(timer);
  }
}

const DEADLINE_RESULT =
  "the run's spec.budget.timeout passed while this call ran, so its answer was not waited for; the run ends with its partial diff";

const DEADLINE_RESPONSE: ToolResponse = { ok: false, error: { code: 'TIMEOUT', message: DEADLINE_RESULT } };

/** A call not sent because the deadline had passed: it did not run, and the transcript says so. */
const UNSENT_RESPONSE: ToolResponse = {
  ok: false,
  error: {
    code: 'TIMEOUT',
    message: "the run's spec.budget.timeout had passed before this call was sent, so it did not run; the run ends with its partial diff",
  },
};

/**
 * The same in a step redone after a failed try: that try may have sent the call and the
 * toolbox run it (a result not kept is not proof it did not run), so "it did not run" could be
 * false while the partial diff holds its change. Sent again, the journal would have answered it.
 */
const UNSENT_AGAIN_RESPONSE: ToolResponse = {
  ok: false,
  error: {
    code: 'TIMEOUT',
    message:
      "the run's spec.budget.timeout had passed, so this call was not sent again after the run's deadline; an earlier try of this step may have run it, and what it changed is then in the partial diff; the run ends with its partial diff",
  },
};

const unsentResult = (call: PendingToolCall, redo: boolean): ToolResultRecord =>
  errorResult(call, redo ? UNSENT_AGAIN_RESPONSE : UNSENT_RESPONSE);

const OVERSIZED_RESULT =
  'the answer was larger than the sandbox protocol carries, so it was dropped; ask for less: a narrower path or pattern, or a lower limit';

export async function executeToolCall(
  sandbox: Sandbox,
  call: PendingToolCall,
  observe?: ToolCallObserver,
  /** The run's deadline (withRunDeadline). */
  deadline?: AbortSignal,
  /** The run's step, for the journal key; without it the call may run again when repeated. */
  step?: number,
  /** Absent: images are described in text, never shown. */
  images?: ImageShowing,
  /** Aborts once the step's calls failed (executeToolCalls): the call is abandoned, and throws. */
  stop?: AbortSignal,
  /** An earlier try of this step may have sent the call (the step is redone: hand-on.ts continueStep). */
  redo = false,
): Promise<ToolResultRecord> {
  // Past the deadline nothing more is sent: the run is ending, and a call sent now would run
  // beside the one the deadline cut off (the toolbox does not serialise bash) and land its
  // effects in the partial diff. In a chain, the calls after a timed-out one are answered so.
  if (deadline?.aborted && !stop?.aborted) return unsentResult(call, redo);
  const started = performance.now();
  const request = { tool: call.toolName, input: call.input, ...(step === undefined ? {} : { callId: journalKey(step, call) }) };
  const signal = deadline && stop ? AbortSignal.any([deadline, stop]) : (deadline ?? stop);
  let response: ToolResponse;
  try {
    response = await sandbox.call(request, signal ? { signal } : {});
  } catch (error) {
    if (stop?.aborted) throw error;
    if (deadline?.aborted && SandboxError.isInstance(error) && error.reason === 'ABORTED') {
      // Given up on before its request was written (its session still starting, its turn not
      // come): it did not run here, so it is not said to have run.
      if (error.written === false) return unsentResult(call, redo);
      response = DEADLINE_RESPONSE;
    } else if (SandboxError.isInstance(error) && error.reason === 'RESPONSE_TOO_LARGE') {
      // Both transports drop just that answer and keep working (the Sandbox contract), so
      // the model is told to ask for less instead of the step being retried into SandboxLost.
      response = { ok: false, error: { code: 'TOO_LARGE', message: OVERSIZED_RESULT } };
    } else {
      throw error;
    }
  }
  observe?.(call.toolName, response.ok ? 'ok' : 'error', (performance.now() - started) / 1000);
  if (response.ok && call.toolName === 'read_file' && isImageRead(response.result)) {
    const shown = decideImageResult({
      read: response.result,
      modelAcceptsImages: images?.modelAcceptsImages ?? false,
      shownThisStep: images?.shown ?? 0,
    });
    if (shown.image && images) images.shown += 1;
    return {
      toolCallId: call.toolCallId,
      toolName: call.toolName,
      ok: true,
      text: shown.text,
      ...(shown.image ? { image: shown.image } : {}),
    };
  }
  if (response.ok) {
    return { toolCallId: call.toolCallId, toolName: call.toolName, ok: true, text: toolResultText(call.toolName, response.result) };
  }
  return errorResult(call, response);
}

function errorResult(call: PendingToolCall, response: Extract<ToolResponse, { ok: false }>): ToolResultRecord {
  return {
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    ok: false,
    text: boundToolResult(`${response.error.code}: ${response.error.message}`).text,
  };
}

/**
 * Runs a step's calls, each chain in order (tool-call-ordering.ts), and answers their results
 * in the order of `calls`. A tool error is a result and the other calls go on. The first call
 * that throws (a broken sandbox; its result could not be kept) fails them all: no call starts
 * after it, the calls running are abandoned, and none of them is told to `onResult`. The job
 * fails and BullMQ runs the step again; a call left running would otherwise save its older
 * copy of the state over the retry's, with no deadline and no worker slot of its own. What
 * it did in the sandbox is not lost: the retry gets the answer of a call that changes files
 * from the toolbox's journal, and runs a read again.
 */
export async function executeToolCalls(
  sandbox: Sandbox,
  calls: readonly PendingToolCall[],
  observe?: ToolCallObserver,
  /** The run's deadline (withRunDeadline). */
  deadline?: AbortSignal,
  /** Told of each result as its call finishes (the step keeps it, run-tool-calls.ts), before the next call on its chain starts. */
  onResult?: (result: ToolResultRecord) => Promise<void>,
  step?: number,
  images?: ImageShowing,
  /** An earlier try of this step may have sent these calls (the step is redone: hand-on.ts continueStep). */
  redo = false,
): Promise<ToolResultRecord[]> {
  const failed = new AbortController();
  const chains = new Map<string, Promise<unknown>>();
  const results = calls.map((call) => {
    const key = orderingKey(call);
    const previous = chains.get(key) ?? Promise.resolve();
    const result = previous.then(async () => {
      try {
        failed.signal.throwIfAborted();
        const record = await executeToolCall(sandbox, call, observe, deadline, step, images, failed.signal, redo);
        // Answered after another call failed: not kept; the retry sends it again (journalKey).
        failed.signal.throwIfAborted();
        await onResult?.(record);
        return record;
      } catch (error) {
        if (!failed.signal.aborted) failed.abort(error);
        throw error;
      }
    });
    // The chain goes on when the call settles: after a failure, only to throw (above).
    chains.set(
      key,
      result.catch(() => undefined),
    );
    return result;
  });
  return Promise.all(results);
}

/**
 * Tool calls one step runs at most. A model may answer with thousands (16 MiB of answer
 * allows that): each started at once, and each that changes files saving the whole state,
 * so one step could hold a worker's memory and the sandbox. The calls past the cap are not
 * run; the model is told so for each and may make them in its next step.
 */
export const MAX_TOOL_CALLS_PER_STEP = 64;

export interface ToolCallCap {
  /**
   * The tool calls the model's answer held: the calls given here, the ones the SDK could not
   * parse, and the ones past the answer's bound that the SDK never saw
   * (providers/with-answer-bounds.ts). The model is told this number; `calls.length` by default.
   */
  readonly made?: number;
  readonly max?: number;
}

/** The calls a step runs (the first MAX_TOOL_CALLS_PER_STEP) and a tool error for each of the others. */
export function capToolCalls(
  calls: readonly PendingToolCall[],
  { made = calls.length, max = MAX_TOOL_CALLS_PER_STEP }: ToolCallCap = {},
): { run: PendingToolCall[]; refused: ToolResultRecord[] } {
  const refused = calls.slice(max).map((call) => ({
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    ok: false,
    text: `TOO_MANY_CALLS: this step made ${made} tool calls and at most ${max} run in one step; this one did not run. Make it again in your next step if you still need it.`,
  }));
  return { run: calls.slice(0, max), refused };
}

export function deniedResult(call: PendingToolCall, reason: string): ToolResultRecord {
  return { toolCallId: call.toolCallId, toolName: call.toolName, ok: false, text: `DENIED: a human denied this call: ${reason}` };
}

/** The tool message answering a step's calls, in the order the model made them. */
export function toolMessage(results: readonly ToolResultRecord[]): ModelMessage {
  const content: ToolResultPart[] = results.map((result) => {
    // An image goes as a file part only when it is one (imageToSend), never for text that looks like data.
    const { text, image } = imageToSend(result);
    return {
      type: 'tool-result',
      toolCallId: result.toolCallId,
      toolName: result.toolName,
      output: !result.ok
        ? { type: 'error-text', value: result.text }
        : image
          ? {
              type: 'content',
              value: [
                { type: 'text', text },
                { type: 'file', mediaType: image.mediaType, data: { type: 'data', data: image.data } },
              ],
            }
          : { type: 'text', value: text },
    };
  });
  return { role: 'tool', content };
}
