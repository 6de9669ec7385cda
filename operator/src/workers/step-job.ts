// step: one model call and its tool calls. Loads the state, checks the budgets, calls the
// model and keeps its answer, runs the tools (keeping each result as it comes, a read's with
// the next save; parking the run if a call needs a human), writes the status, then enqueues
// the next step or finalize. A step redone after a crash goes on from what was kept
// (hand-on.ts): the model is not asked again and a finished call that changes something is
// not run again; only such a call the crash cut off is, and reads not yet saved. A step of
// reads only is saved at its end, so a retry asks the model again: what a failed try spent
// is kept first (spent-on-unsaved-step.ts). The calls run in run-tool-calls.ts, the step ends
// in end-step.ts. The step before's record may still be on its way (trailing-record.ts):
// end-step.ts settles it before this step's own. A run with a cancel requested gets no model
// call and no tool call (live-run.ts runToActOn): the job throws CancelRequestedError and is
// tried again later, and the controller ends the run meanwhile (or the cancel is withdrawn). A
// run whose spec no longer parses gets none either, and keeps its state (SpecNoLongerValidError).
// A run ended during the model call gets none of the answer's calls: the stop that ended it
// deleted the state, which the job looks for in Redis before the calls (stillThere).
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { generateText, type LanguageModel, type ModelMessage } from 'ai';
import { timerDelay } from '../timer-delay.ts';
import { prepareContext, SUMMARY_INSTRUCTIONS } from '../agent/context-manager.ts';
import { answerCutOff, decideStop } from '../agent/stop-conditions.ts';
import { cutOffToolCallId, explainCutOffToolCall } from '../agent/cut-off-tool-call.ts';
import { boundInvalidToolCalls } from '../agent/bound-invalid-tool-calls.ts';
import { answerToolCallsNotOffered } from '../agent/tool-calls-not-offered.ts';
import { buildSystemPrompt } from '../agent/system-prompt.ts';
import { estimateToolSchemaTokens } from '../agent/estimate-tool-schema-tokens.ts';
import { buildToolSet } from '../agent/tool-definitions.ts';
import { toolboxToolDefinitions } from '../agent/toolbox-tool-definitions.ts';
import { estimateMessagesTokens, estimateTextTokens } from '../agent/estimate-tokens.ts';
import { addUsage, emptyUsage, usageOfModelAnswer, type TokenUsage } from '../agent/usage-accounting.ts';
import { ModelAnswerUnusableError } from '../providers/errors/model-answer-unusable-error.ts';
import { ModelContextTooLongError } from '../providers/errors/model-context-too-long-error.ts';
import { withAnswerBounds } from '../providers/with-answer-bounds.ts';
import { FAILURE_MESSAGES, REASONS, RunFailure, durationMs, type ParsedCodingRun } from '../api/index.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { endStep } from './end-step.ts';
import { forgetRun } from './forget-run.ts';
import { handOn } from './hand-on.ts';
import { heldRunToActOn, putOffError, runToActOn, throwIfPutOff, type RunToActOn } from './live-run.ts';
import { letRunGo, saveIfPresent, saveOrLetGo, type LetGo } from './save-if-present.ts';
import { usableToolCallId, withUsableToolCallIds } from './usable-tool-call-ids.ts';
import type { PendingToolCall, RunState } from './run-state.ts';
import { capToolCalls, MAX_TOOL_CALLS_PER_STEP } from './tool-execution.ts';
import { countTokens } from './run-metrics.ts';
import { mergeTimings, timing } from '../reconcile/run-timings.ts';
import { runInFlightCalls, savedBeforeCalls } from './run-tool-calls.ts';
import { countTeamTokens, teamBudgetStop } from './team-token-budget.ts';
import { keepSpentOfUnsavedStep } from './spent-on-unsaved-step.ts';
import { settleTrailingRecord } from './trailing-record.ts';

const TOOL_DEFINITIONS = toolboxToolDefinitions();
/** After a context-too-long refusal the conversation is compacted to fit this share of what was sent. */
const OVERFLOW_SHRINK = 0.75;
// The request body is the whole conversation as JSON and the response body the raw answer;
// the SDK keeps both in its result by default. Nothing here reads them, and with a big
// transcript or a big answer they would double the step's memory.
const LEAN_RESULT = { requestBody: false, responseBody: false } as const;
/**
 * Tool calls of one answer the SDK is given (providers/answer-bounds.ts): one over the calls a
 * step runs, so the step still sees the answer was over its cap and tells the model so.
 */
const ANSWER_TOOL_CALLS = MAX_TOOL_CALLS_PER_STEP + 1;
/** A run ended during the model call (its stop deleted the state): the answer's calls must not run. */
const MODEL_CALL_ENDED: LetGo = { why: 'the run ended during the model call: its tool calls are not run and the run is let go' };
/** A run ended before a budget stop before the model call was saved: no finalize is queued for it. */
const STOPPED_BEFORE_CALL: LetGo = { why: 'the run ended before its budget stop was saved: no finalize is queued and the run is let go' };

/** One model call through generateText: what it returned, and its answer as with-answer-bounds.ts reported it. */
interface ModelCall<T> {
  readonly result: T;
  readonly usage: TokenUsage;
  /** Tool calls past ANSWER_TOOL_CALLS, which the SDK never saw. */
  readonly droppedToolCalls: number;
}

export function deadlineOf(run: ParsedCodingRun, state: RunState): number {
  return state.startedAt + durationMs(run.spec.budget.timeout);
}

/** Stop before a model call when a budget (which may have changed) is already spent. */
function stopBeforeCall(run: ParsedCodingRun, state: RunState, now: number) {
  const decision = decideStop({
    steps: state.step,
    discardedModelCalls: state.discardedModelCalls,
    lastStepHadToolCalls: true,
    usage: state.usage,
    budget: run.spec.budget,
    startedAt: state.startedAt,
    timeoutMs: durationMs(run.spec.budget.timeout),
    now,
  });
  return decision.stop && decision.outcome === 'failed' ? decision : undefined;
}

export async function runStepJob(deps: AgentDependencies, ref: RunRef, completed: number): Promise<void> {
  const state = await deps.states.load(ref);
  if (!state) throw new RunFailure(REASONS.StateLost, FAILURE_MESSAGES.stateGone);
  if (state.inFlight) {
    // An earlier try got the model's answer and ran some of its calls (or a cancel stopped it
    // before them): finish the rest, unless a cancel is requested now. One read of the run says
    // both that and whether there is still a run to act for.
    if (state.step !== completed + 1) return;
    const found = await runToActOn(deps, ref);
    throwIfPutOff(found, 'run the calls left of the step under way');
    if ('ended' in found) {
      await forgetRun(deps, ref);
      return;
    }
    await endStep(deps, found.run, state, await runInFlightCalls(deps, found.run, state, true));
    return;
  }
  if (state.stage !== 'stepping' || state.step !== completed) {
    // This step was done and saved by an earlier try, which may have died before it
    // handed the run on (an API server outage during the status write). A stop before the
    // model call (a budget, the deadline) saves 'finalizing' without counting a step.
    if (state.step > completed || state.stage === 'finalizing') await handOn(deps, ref, state);
    return;
  }
  // The run is read for its budget (which may change) and, Security #11.1, for its model:
  // what to call with which secret comes from the live, validated spec, never from Redis.
  const stepStarted = performance.now();
  const stepStartedAt = deps.now().toISOString();
  const found = await runToActOn(deps, ref);
  throwIfPutOff(found, 'ask the model');
  if ('ended' in found) {
    await forgetRun(deps, ref);
    return;
  }
  const { run } = found;
  const model = specificationV4(await deps.models(run.metadata.namespace, run.spec.model, run.metadata.uid));
  const early = stopBeforeCall(run, state, deps.now().getTime()) ?? (await teamBudgetStop(deps, ref.namespace));
  if (early) {
    // The step before may still owe its record (trailing-record.ts): it lands before finalize.
    await settleTrailingRecord(deps, run, state);
    state.stage = 'finalizing';
    state.stop = { reason: early.reason, message: early.message };
    // The run may have ended since its state was loaded (the Secret read, the tally's): its
    // stop deleted the state, and the finalize queued here would act for a run that ended.
    if (await saveOrLetGo(deps, ref, state, STOPPED_BEFORE_CALL)) await deps.queue.finalize(ref, state.verification?.attempts);
    return;
  }

  const system = buildSystemPrompt({
    task: run.spec.task,
    instructions: run.spec.instructions,
    allowedTools: run.spec.tools.allow,
    approvalTools: run.spec.approval.tools,
  });
  const tools = buildToolSet(run.spec.tools.allow, TOOL_DEFINITIONS);
  const deadline = AbortSignal.timeout(timerDelay(Math.max(1, deadlineOf(run, state) - deps.now().getTime())));
  // A model call also ends with the job's lease (job-lease.ts): a worker that lost the job's
  // lock to another stops waiting for (and paying for) an answer it could not keep.
  const callSignal = deps.lease ? AbortSignal.any([deadline, deps.lease]) : deadline;
  const { provider, name: modelName = provider } = run.spec.model;
  // Every answer the model gave this step, counted as it came, before the SDK worked on it.
  const spent: TokenUsage[] = [];
  /**
   * One generateText call, its answer bounded before the SDK works on it. `sentTokens`, the
   * estimate of what is sent, counts for a provider that reports no usage, or too little of
   * it to be believed. The SDK failing on
   * an answer is that answer's fault: asking again would spend its tokens again for the same.
   */
  const callModel = async <T>(sentTokens: number, generate: (bounded: LanguageModelV4) => Promise<T>): Promise<ModelCall<T>> => {
    let answer: { usage: TokenUsage; droppedToolCalls: number } | undefined;
    const bounded = withAnswerBounds(model, {
      maxToolCalls: ANSWER_TOOL_CALLS,
      onAnswer: (given) => {
        // A script's figures are its author's, not a provider's count (usage-accounting.ts).
        const usage = usageOfModelAnswer(given, sentTokens, { declared: provider === 'scripted' });
        answer = { usage, droppedToolCalls: given.droppedToolCalls };
        spent.push(answer.usage);
      },
    });
    try {
      const result = await generate(bounded);
      // Every model answers through doGenerate before generateText returns.
      return { result, ...answer! };
    } catch (error) {
      if (answer === undefined || RunFailure.isInstance(error) || deadline.aborted) throw error;
      throw new ModelAnswerUnusableError({ provider, step: state.step + 1, cause: error });
    }
  };
  // The last compaction's summary, for the transcript.
  let compactionSummary: string | undefined;
  const prepare = (messages: readonly ModelMessage[], filesTouched: RunState['filesTouched'], contextWindow: number) =>
    prepareContext({
      system,
      messages,
      budget: { contextWindow },
      filesTouched,
      // Every request carries the tool schemas too (#13.10): thousands of tokens for the full set.
      fixedTokens: estimateToolSchemaTokens(run.spec.tools.allow, TOOL_DEFINITIONS),
      summarise: async ({ messages: older, instructions }) => {
        const summarySystem = instructions ?? SUMMARY_INSTRUCTIONS;
        const summary = await callModel(estimateTextTokens(summarySystem) + estimateMessagesTokens(older), (bounded) =>
          generateText({
            model: bounded,
            system: summarySystem,
            messages: [...older],
            maxRetries: 0,
            abortSignal: callSignal,
            experimental_include: LEAN_RESULT,
          }),
        );
        compactionSummary = summary.result.text;
        return { text: summary.result.text, usage: summary.usage };
      },
    });
  // `sentTokens`: the context manager's estimate of the request, system prompt and tool schemas included.
  const ask = (messages: readonly ModelMessage[], sentTokens: number) =>
    callModel(sentTokens, (bounded) =>
      generateText({
        model: bounded,
        system,
        messages: [...messages],
        tools,
        maxRetries: 0,
        abortSignal: callSignal,
        experimental_include: LEAN_RESULT,
      }),
    );
  // Every token status counts, the compaction call's too, under the run's namespace.
  // The model label is the name the run wrote, and an endpoint that ignores it answers to any:
  // countTokens bounds its values (observability/model-label.ts). A scripted run is `script`,
  // whatever its name, so scripted runs take none of the named values.
  const tokenLabels = { namespace: ref.namespace, provider, model: provider === 'scripted' ? 'script' : modelName };
  /**
   * The answers a failed step got were spent all the same (a compaction's before a call that
   * failed; an answer the SDK failed on): the metric and the namespace's daily tally count
   * them, and so does the state, which nothing of this step has changed yet: a retry (it
   * compacts again) checks maxTokens with them, and a run that ends on it shows them
   * (fail-run.ts takes usage from the state).
   */
  const failAfterSpending = async (error: unknown): Promise<never> => {
    const spentUsage = addUsage(...spent);
    countTokens(deps, tokenLabels, spentUsage);
    await countTeamTokens(deps, ref.namespace, spentUsage.totalTokens);
    if (spent.length > 0) {
      state.usage = addUsage(state.usage, spentUsage);
      // Only over a state still there: a run ended during the call has none to keep them in
      // (its stop deleted it), and the error goes on as it would have.
      await saveIfPresent(deps, state).catch((saveError: unknown) => {
        deps.logger.warn({ err: saveError instanceof Error ? saveError.message : String(saveError) }, 'could not save the spent tokens');
      });
    }
    throw error;
  };
  let context = await prepare(state.messages, state.filesTouched, run.spec.model.contextWindow).catch(failAfterSpending);
  let compactionUsage = context.compacted ? context.usage : emptyUsage();
  const modelStarted = performance.now();
  const modelStartedAt = deps.now();
  let called: Awaited<ReturnType<typeof ask>>;
  try {
    try {
      called = await ask(context.messages, context.estimatedTokens);
    } catch (error) {
      // The provider counted more than the estimate: compact below what it refused and ask once
      // more (#13.10). Nothing to gain (no summary could help, no result to cut): the refusal stands.
      if (!ModelContextTooLongError.isInstance(error)) throw error;
      const smaller = await prepare(context.messages, context.filesTouched, Math.floor(context.estimatedTokens * OVERFLOW_SHRINK));
      if (!smaller.compacted && smaller.cutResults === 0) throw error;
      deps.logger.warn(
        { estimatedTokens: context.estimatedTokens, compactedTo: smaller.estimatedTokens, cutResults: smaller.cutResults },
        'context too long; compacted and retrying',
      );
      context = smaller;
      compactionUsage = addUsage(compactionUsage, smaller.usage);
      called = await ask(context.messages, context.estimatedTokens);
    }
  } catch (error) {
    return failAfterSpending(error);
  }
  const { result, usage: callUsage, droppedToolCalls } = called;
  const modelMs = performance.now() - modelStarted;
  // The run's first model call (status.timings), kept with the state saved below.
  if (state.step === 0) state.timings = mergeTimings(state.timings, [timing('FirstModelCall', modelStartedAt, deps.now())]);
  deps.metrics.modelCallDuration.observe({ provider }, modelMs / 1000);
  deps.metrics.steps.inc({ provider });
  countTokens(deps, tokenLabels, compactionUsage);
  countTokens(deps, tokenLabels, callUsage);

  // The SDK answers calls it could not parse (or to tools not offered) itself, as tool
  // errors in response.messages; only the valid calls are ours to run. A call the provider
  // says it ran (an MCP call) the SDK keeps though no tool of the run has its name: it is
  // answered the same way here (tool-calls-not-offered.ts), and never run or parked on. A call
  // cut off at the output limit is told so, not just that its JSON did not parse (cut-off-tool-call.ts).
  const cutCall = cutOffToolCallId(result.finishReason, result.toolCalls, droppedToolCalls);
  const notOffered = answerToolCallsNotOffered(result.response.messages as ModelMessage[], result.toolCalls, tools);
  const toolCalls = result.toolCalls.map((call) => {
    const error = notOffered.answered.get(call.toolCallId);
    return error === undefined ? call : { ...call, invalid: true as const, error: new Error(error) };
  });
  // The SDK's errors quote the whole argument text: bounded as results are (bound-invalid-tool-calls.ts).
  const invalidCallIds = new Set(toolCalls.filter((call) => (call as { invalid?: boolean }).invalid).map((call) => call.toolCallId));
  const answered = boundInvalidToolCalls(explainCutOffToolCall(notOffered.messages, cutCall), invalidCallIds);
  // An id the run cannot keep (too long, empty) is replaced in the messages and the calls alike (usable-tool-call-ids.ts).
  const responseMessages = withUsableToolCallIds(answered);
  const valid: PendingToolCall[] = toolCalls
    .filter((call) => !(call as { invalid?: boolean }).invalid)
    .map((call) => ({ toolCallId: usableToolCallId(call.toolCallId), toolName: call.toolName, input: call.input }));
  // At most MAX_TOOL_CALLS_PER_STEP run; the others are answered with a tool error, first in the
  // tool message, which tells the model how many calls its answer held, the dropped ones too.
  const { run: calls, refused } = capToolCalls(valid, { made: result.toolCalls.length + droppedToolCalls });
  state.messages = [...context.messages, ...responseMessages];
  state.filesTouched = context.filesTouched;
  state.usage = addUsage(state.usage, compactionUsage, callUsage);
  state.step += 1;
  // Calls answered with a tool error count as made (status.toolCalls): invalid ones and those
  // past the step's cap. Those past the answer's bound were never in the conversation; the
  // step's record counts them with the others that did not run.
  const answeredWithErrors = result.toolCalls.length - valid.length + refused.length;
  state.toolCalls += answeredWithErrors;
  const unusableCalls = answeredWithErrors + droppedToolCalls;
  countUnusableToolCalls(state, toolCalls);

  const cutOff = answerCutOff(result.finishReason, result.toolCalls.length > 0);
  state.inFlight = {
    calls,
    results: [],
    earlier: refused,
    hadToolCalls: result.toolCalls.length > 0,
    ...(cutOff ? { cutOff } : {}),
    toolNames: result.toolCalls.map((call) => call.toolName),
    text: result.text,
    resumed: false,
    record: {
      startedAt: stepStartedAt,
      usage: callUsage,
      ...(compactionSummary !== undefined
        ? { compaction: { summary: compactionSummary, summarisedMessages: context.summarisedMessages, usage: compactionUsage } }
        : {}),
      ...(unusableCalls > 0 ? { unusableCalls } : {}),
    },
  };
  // The namespace's daily tally (Redis) goes out now, beside the calls, and is waited for
  // before the step hands on (the next step's budget check reads it); it never throws.
  const tallied = countTeamTokens(deps, ref.namespace, compactionUsage.totalTokens + callUsage.totalTokens);
  // A cancel asked for during the model call (which can take minutes): its calls do not run.
  // The answer is saved as the step in flight (a cancel withdrawn runs its calls, not the model
  // again), and its tokens go to status.usage in one request, which the controller's ending
  // keeps. The step before's progress, maybe still on its way, lands first (trailing-record.ts).
  // A spec that no longer parses holds the calls the same way, the state kept for the
  // controller's InvalidSpec ending (live-run.ts runNow), as does a copy of the run from before
  // it was accepted (no spec the calls may run for). A run ended meanwhile (Cancelled by
  // the controller, a deletion) is let go: its calls must not run, nor a save before them bring
  // the state back. A held copy may show the end; the state shows it on every replica, since
  // the stop that ends a run deletes it (agent-queue.ts stop): the save before the calls is
  // made only over a state still there, and a step of reads, which saves nothing before its
  // calls, looks whether it is (stillThere).
  const meanwhile = calls.length > 0 ? await runAfterModelCall(deps, ref) : undefined;
  const letGo = async () => {
    await tallied;
    await letRunGo(deps, ref, state, MODEL_CALL_ENDED);
  };
  if (meanwhile && 'ended' in meanwhile) return letGo();
  const putOff = meanwhile && putOffError(meanwhile, CALLS_HELD);
  if (putOff) {
    try {
      await tallied;
      await settleTrailingRecord(deps, run, state);
      if (!(await saveOrLetGo(deps, ref, state, MODEL_CALL_ENDED))) return;
      await deps.status.progress(ref.namespace, ref.name, ref.uid, {
        steps: state.step,
        toolCalls: state.toolCalls,
        usage: { ...state.usage },
      });
    } catch (error) {
      // As below: a save that failed leaves a retry to ask the model again; the answer was paid for.
      await keepSpentOfUnsavedStep(deps, ref, completed, addUsage(compactionUsage, callUsage));
      throw error;
    }
    throw putOff;
  }
  let toolsMs: number;
  try {
    // The state is saved before the calls only when one must not run twice (savedBeforeCalls),
    // and then only over a state still there; else it is saved at the step's end (stillThere).
    if (calls.length > 0 && !(await stillThere(deps, ref, state, calls))) return await letGo();
    const toolsStarted = performance.now();
    const parked = await runInFlightCalls(deps, run, state);
    toolsMs = performance.now() - toolsStarted;
    await tallied;
    await endStep(deps, run, state, parked);
  } catch (error) {
    // A step not saved yet is asked again by the retry: what this try spent is kept now, as
    // it would be in a save before the calls, without that save's cost on every step of reads.
    await keepSpentOfUnsavedStep(deps, ref, completed, addUsage(compactionUsage, callUsage));
    throw error;
  }
  // What this job spends outside the model and the tools after the state load (run read,
  // saves, status, enqueue). `make bench` reports a wider step overhead, pickup to next
  // pickup (test/bench/step-cycles.ts), and takes totalMs, modelMs and toolsMs from here.
  const totalMs = performance.now() - stepStarted;
  deps.logger.info({ toolCalls: calls.length, totalMs, modelMs, toolsMs, overheadMs: totalMs - modelMs - toolsMs }, 'step done');
}

const CALLS_HELD = "run the model's tool calls";
/**
 * The look between the model's answer and its calls, from the copy of the run this process
 * holds: on a replica that is not the leader, after a model call longer than the copy is kept,
 * getRun would be one GET more per step (issue #17). Holding none, it is skipped (undefined):
 * a cancel requested is then found by the next step's start, and a run ended by the state gone
 * (stillThere). Without the dependency the run is read.
 */
async function runAfterModelCall(deps: AgentDependencies, ref: RunRef): Promise<RunToActOn | undefined> {
  if (!deps.getRunHeld) return runToActOn(deps, ref);
  return heldRunToActOn(deps.getRunHeld(ref.namespace, ref.name), ref);
}

/**
 * Whether the run's state is still in Redis as the answer's calls are about to run: the stop
 * that ends a run (a cancel's ending, a deletion) deletes it, on whichever replica, and cannot
 * remove a job that is running. A step whose calls must not run twice saves its state before
 * them (savedBeforeCalls), over a state still there, in one script; a step of reads saves
 * nothing before its calls, and looks (one EXISTS, no request to the API server). A run that
 * ends after this look has its calls under way run, as it would have one that is already running.
 */
async function stillThere(deps: AgentDependencies, ref: RunRef, state: RunState, calls: readonly PendingToolCall[]): Promise<boolean> {
  return savedBeforeCalls(calls) ? saveIfPresent(deps, state) : deps.states.exists(ref.uid);
}

/**
 * Counts steps in a row whose tool calls all came back unusable (the SDK marks them invalid:
 * arguments that are not JSON or do not fit the tool, a tool not offered), so decideStop can
 * give up on a model that cannot call tools. Any usable call, or an answer, resets it.
 */
function countUnusableToolCalls(state: RunState, toolCalls: readonly { toolName: string; invalid?: boolean; error?: unknown }[]): void {
  const unusable = toolCalls.filter((call) => call.invalid === true);
  if (unusable.length === 0 || unusable.length < toolCalls.length) {
    delete state.unusableToolCallSteps;
    delete state.lastUnusableToolCall;
    return;
  }
  const last = unusable[unusable.length - 1]!;
  const why = last.error instanceof Error ? last.error.message : 'unusable';
  state.unusableToolCallSteps = (state.unusableToolCallSteps ?? 0) + 1;
  state.lastUnusableToolCall = `${last.toolName}: ${why.replace(/\s+/g, ' ')}`.slice(0, 300);
}

/**
 * The factory's model as the specification the answer bounds wrap: createLanguageModel builds
 * only v4 models, so anything else is a bug here, not a run's failure.
 */
function specificationV4(model: LanguageModel): LanguageModelV4 {
  if (typeof model === 'object' && model.specificationVersion === 'v4') return model;
  throw new TypeError(
    `the model factory returned a model the step cannot bound (${typeof model === 'string' ? 'a model id' : model.specificationVersion})`,
  );
}
