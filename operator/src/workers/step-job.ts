// step: one model call and its tool calls. Loads the state, checks the budgets, calls the
// model and keeps its answer, runs the tools (keeping each result as it comes, parking the
// run if a call needs a human), writes the status, then enqueues the next step or finalize.
// A step redone after a crash goes on from what was kept: the model is not asked again and
// a finished call is not run again; only a call the crash cut off is.
import { generateText, type ModelMessage } from 'ai';
import { durationMs, type ParsedCodingRun } from '../api/index.ts';
import { prepareContext, SUMMARY_INSTRUCTIONS } from '../agent/context-manager.ts';
import { collectFilesTouched } from '../agent/files-touched.ts';
import { decideStop } from '../agent/stop-conditions.ts';
import { buildSystemPrompt } from '../agent/system-prompt.ts';
import { buildToolSet } from '../agent/tool-definitions.ts';
import { toolboxToolDefinitions } from '../agent/toolbox-tool-definitions.ts';
import { addUsage, emptyUsage, usageOfModelCall } from '../agent/usage-accounting.ts';
import { setCondition } from '../reconcile/conditions.ts';
import { pendingApprovalView, previewInput, refuseOversizedApproval } from './approval-input.ts';
import { REASONS, STATE_LOST_MESSAGE, failRun, forgetRun, liveRun, toolCallObserver, type AgentDependencies, type RunRef } from './agent-dependencies.ts';
import type { PendingToolCall, RunState, ToolResultRecord } from './run-state.ts';
import { executeToolCalls, summariseCalls, toolMessage } from './tool-execution.ts';

const TOOL_DEFINITIONS = toolboxToolDefinitions();
// The request body is the whole conversation as JSON and the response body the raw answer;
// the SDK keeps both in its result by default. Nothing here reads them, and with a big
// transcript or a big answer they would double the step's memory.
const LEAN_RESULT = { requestBody: false, responseBody: false } as const;

export function deadlineOf(run: ParsedCodingRun, state: RunState): number {
  return state.startedAt + durationMs(run.spec.budget.timeout);
}

/** Stop before a model call when a budget (which may have changed) is already spent. */
function stopBeforeCall(run: ParsedCodingRun, state: RunState, now: number) {
  const decision = decideStop({
    steps: state.step,
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
  if (!state) {
    await failRun(deps, ref, REASONS.StateLost, STATE_LOST_MESSAGE);
    return;
  }
  if (state.inFlight) {
    // An earlier try got the model's answer and ran some of its calls: finish the rest.
    if (state.step === completed + 1) await continueStep(deps, ref, state);
    return;
  }
  if (state.stage !== 'stepping' || state.step !== completed) {
    // This step was done and saved by an earlier try, which may have died before it
    // handed the run on (an API server outage during the status write).
    if (state.step > completed) await handOn(deps, ref, state);
    return;
  }
  // The run is read for its budget (which may change) and, Security #11.1, for its model:
  // what to call with which secret comes from the live, validated spec, never from Redis.
  const stepStarted = performance.now();
  const run = await liveRun(deps, ref);
  if (!run) {
    await forgetRun(deps, ref);
    return;
  }
  const model = await deps.models(run.metadata.namespace, run.spec.model);
  const early = stopBeforeCall(run, state, deps.now().getTime());
  if (early) {
    state.stage = 'finalizing';
    state.stop = { reason: early.reason, message: early.message };
    await deps.states.save(state);
    await deps.queue.finalize(ref);
    return;
  }

  const system = buildSystemPrompt({ task: run.spec.task, instructions: run.spec.instructions, allowedTools: run.spec.tools.allow, approvalTools: run.spec.approval.tools });
  const tools = buildToolSet(run.spec.tools.allow, TOOL_DEFINITIONS);
  const deadline = AbortSignal.timeout(Math.max(1, deadlineOf(run, state) - deps.now().getTime()));
  const context = await prepareContext({
    system,
    messages: state.messages,
    budget: { contextWindow: run.spec.model.contextWindow },
    filesTouched: state.filesTouched,
    summarise: async ({ messages, instructions }) => {
      const summary = await generateText({ model, system: instructions ?? SUMMARY_INSTRUCTIONS, messages: [...messages], maxRetries: 0, abortSignal: deadline, experimental_include: LEAN_RESULT });
      return { text: summary.text, usage: usageOfModelCall(summary.usage) };
    },
  });
  const modelStarted = performance.now();
  const result = await generateText({ model, system, messages: [...context.messages], tools, maxRetries: 0, abortSignal: deadline, experimental_include: LEAN_RESULT });
  const modelMs = performance.now() - modelStarted;
  const { provider, name: modelName = provider } = run.spec.model;
  deps.metrics.modelCallDuration.observe({ provider }, modelMs / 1000);
  deps.metrics.steps.inc({ provider });
  const callUsage = usageOfModelCall(result.usage);
  for (const [direction, value] of [['input', callUsage.inputTokens], ['output', callUsage.outputTokens], ['cache_read', callUsage.cacheReadTokens], ['reasoning', callUsage.reasoningTokens]] as const) {
    if (value > 0) deps.metrics.tokens.inc({ direction, provider, model: modelName }, value);
  }

  // The SDK answers calls it could not parse (or to tools not offered) itself, as tool
  // errors in response.messages; only the valid calls are ours to run.
  const responseMessages = [...result.response.messages] as ModelMessage[];
  const calls: PendingToolCall[] = result.toolCalls
    .filter((call) => !(call as { invalid?: boolean }).invalid)
    .map((call) => ({ toolCallId: call.toolCallId, toolName: call.toolName, input: call.input }));
  state.messages = [...context.messages, ...responseMessages];
  state.filesTouched = context.filesTouched;
  state.usage = addUsage(state.usage, context.compacted ? context.usage : emptyUsage(), callUsage);
  state.step += 1;
  const invalidCalls = result.toolCalls.length - calls.length;
  state.toolCalls += invalidCalls;
  countUnusableToolCalls(state, result.toolCalls);

  state.inFlight = { calls, results: [], earlier: [], hadToolCalls: result.toolCalls.length > 0, toolNames: result.toolCalls.map((call) => call.toolName), text: result.text, resumed: false };
  await deps.states.save(state);
  const toolsStarted = performance.now();
  const parked = await runInFlightCalls(deps, run, state);
  const toolsMs = performance.now() - toolsStarted;
  await endStep(deps, run, state, parked);
  // What this job spends outside the model and the tools after the state load (run read,
  // saves, status, enqueue). `make bench` reports a wider step overhead, pickup to next
  // pickup (test/bench/step-cycles.ts), and takes totalMs, modelMs and toolsMs from here.
  const totalMs = performance.now() - stepStarted;
  deps.logger.info(
    { toolCalls: calls.length, totalMs, modelMs, toolsMs, overheadMs: totalMs - modelMs - toolsMs },
    'step done',
  );
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

/** Runs the in-flight step's calls that are not done yet, saving each result as it comes. True when parked. */
export async function runInFlightCalls(deps: AgentDependencies, run: ParsedCodingRun, state: RunState): Promise<boolean> {
  const inFlight = state.inFlight!;
  const record = async (result: ToolResultRecord) => {
    inFlight.results.push(result);
    await deps.states.save(state);
  };
  return runCallsUntilApproval(deps, run, state, inFlight.calls, inFlight.earlier, { done: [...inFlight.results], record });
}

/** The step's calls ran (or it parked on an approval): settle its answer and hand the run on. */
export async function endStep(deps: AgentDependencies, run: ParsedCodingRun, state: RunState, parked: boolean): Promise<void> {
  const inFlight = state.inFlight!;
  delete state.inFlight;
  if (!parked && !inFlight.hadToolCalls) state.finalText = inFlight.text;
  await afterCalls(deps, run, state, { hadToolCalls: inFlight.hadToolCalls, calls: inFlight.toolNames.map((toolName) => ({ toolName })), resumed: inFlight.resumed });
}

/** Finishes the step an earlier try of a job began. */
async function continueStep(deps: AgentDependencies, ref: RunRef, state: RunState): Promise<void> {
  const run = await liveRun(deps, ref);
  if (!run) {
    await forgetRun(deps, ref);
    return;
  }
  await endStep(deps, run, state, await runInFlightCalls(deps, run, state));
}

/**
 * Runs calls in order up to the first one that needs approval; that one and the rest are
 * parked in the state. Returns true when the run now waits for a human. Calls in
 * `progress.done` finished in an earlier try and are not run again.
 */
export async function runCallsUntilApproval(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  calls: readonly PendingToolCall[],
  earlier: ToolResultRecord[],
  progress?: { done: readonly ToolResultRecord[]; record(result: ToolResultRecord): Promise<void> },
): Promise<boolean> {
  const gated = calls.findIndex((call) => run.spec.approval.tools.includes(call.toolName as never));
  const now = calls.slice(0, gated < 0 ? calls.length : gated);
  const sandbox = deps.sandboxes.for(run);
  const done = new Map((progress?.done ?? []).map((result) => [result.toolCallId, result]));
  const fresh = await executeToolCalls(sandbox, now.filter((call) => !done.has(call.toolCallId)), toolCallObserver(deps), undefined, progress?.record);
  for (const result of fresh) done.set(result.toolCallId, result);
  const results = [...earlier, ...now.map((call) => done.get(call.toolCallId)!)];
  state.toolCalls += now.length;
  if (gated < 0) {
    if (results.length > 0) state.messages.push(toolMessage(results));
    state.filesTouched = collectFilesTouched(state.messages.slice(-2), state.filesTouched);
    delete state.pendingApproval;
    return false;
  }
  const call = calls[gated]!;
  // Security #11.5: a human approves the whole input or nothing; one too large to show whole is denied now.
  const oversized = refuseOversizedApproval(call);
  if (oversized) {
    state.toolCalls += 1;
    deps.metrics.toolCalls.inc({ tool: call.toolName, outcome: 'denied' });
    return runCallsUntilApproval(deps, run, state, calls.slice(gated + 1), [...results, oversized], progress);
  }
  state.stage = 'waiting';
  state.pendingApproval = {
    id: `s${state.step}-c${state.toolCalls + 1}`,
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    input: call.input,
    requestedAt: deps.now().toISOString(),
    results,
    remaining: calls.slice(gated + 1),
  };
  return true;
}

/**
 * Hands on a run whose state a job already saved: enqueues its next job again (a no-op
 * when it exists), or reports the approval it waits for when the status does not show it.
 */
export async function handOn(deps: AgentDependencies, ref: RunRef, state: RunState): Promise<void> {
  if (state.inFlight) await continueStep(deps, ref, state);
  else if (state.stage === 'stepping') await deps.queue.step(ref, state.step);
  else if (state.stage === 'finalizing') await deps.queue.finalize(ref);
  else if (state.stage === 'waiting' && state.pendingApproval) {
    const run = await liveRun(deps, ref);
    if (run && run.status?.pendingApproval?.id !== state.pendingApproval.id) {
      await afterCalls(deps, run, state, { hadToolCalls: true, calls: [state.pendingApproval], resumed: true });
    }
  }
}

/** Save, report, and hand on: the next step, finalize, or a wait for approval. */
export async function afterCalls(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  last: { hadToolCalls: boolean; calls: readonly { toolName: string }[]; resumed?: boolean },
): Promise<void> {
  // The live run's identity, not the state's (Security #11.1: status goes to this run only).
  const ref = { uid: run.metadata.uid, namespace: run.metadata.namespace, name: run.metadata.name };
  const now = deps.now();
  if (state.stage !== 'waiting') {
    const stop = decideStop({
      steps: state.step,
      lastStepHadToolCalls: last.hadToolCalls,
      usage: state.usage,
      budget: run.spec.budget,
      startedAt: state.startedAt,
      timeoutMs: durationMs(run.spec.budget.timeout),
      now: now.getTime(),
      unusableToolCallSteps: state.unusableToolCallSteps ?? 0,
      lastUnusableToolCall: state.lastUnusableToolCall,
    });
    if (stop.stop) {
      state.stage = 'finalizing';
      if (stop.outcome === 'failed') state.stop = { reason: stop.reason, message: stop.message };
    } else {
      state.stage = 'stepping';
    }
  }
  await deps.states.save(state);

  const pending = state.pendingApproval;
  const summary = `Step ${state.step}: ${summariseCalls(last.calls)}; ${state.usage.totalTokens} tokens so far`;
  // The common case, a running run making progress, costs one request; phase changes
  // (approvals) and surprises (a run that ended meanwhile) take the careful path.
  const quick =
    state.stage !== 'waiting' && !last.resumed
      ? await deps.status.progress(ref.namespace, ref.name, ref.uid, { steps: state.step, toolCalls: state.toolCalls, usage: { ...state.usage } })
      : undefined;
  if (quick) {
    // Events are best effort and need not hold up the next step.
    void deps.events.record(quick, { type: 'Normal', reason: 'Step', message: summary });
    if (state.stage === 'finalizing') await deps.queue.finalize(ref);
    else await deps.queue.step(ref, state.step);
    return;
  }
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status) => {
    const generation = run.metadata.generation ?? 0;
    status.steps = state.step;
    status.toolCalls = state.toolCalls;
    status.usage = { ...state.usage };
    if (state.stage === 'waiting' && pending) {
      status.phase = 'WaitingForApproval';
      status.message = `Waiting for approval of a ${pending.toolName} call: kubectl codingrun approve ${ref.name} (or deny).`;
      // The whole input with its size and sha256 (Security #11.5): an approval names that digest.
      status.pendingApproval = pendingApprovalView(pending);
      status.conditions = setCondition(status.conditions, { type: 'AwaitingApproval', status: 'True', reason: 'ToolCallNeedsApproval', message: `A ${pending.toolName} call waits for approval (id ${pending.id}).` }, generation, now);
    } else {
      status.phase = 'Running';
      status.message = 'The agent is working.';
      delete status.pendingApproval;
      if (status.conditions?.some((condition) => condition.type === 'AwaitingApproval')) {
        status.conditions = setCondition(status.conditions, { type: 'AwaitingApproval', status: 'False', reason: 'NoPendingCall', message: 'No tool call waits for approval.' }, generation, now);
      }
    }
    return status;
  });
  if (!outcome.written) {
    // The controller or a user ended the run meanwhile (its state was dropped then, but
    // this step has just saved it again): nothing more to do here.
    await forgetRun(deps, ref);
    return;
  }
  if (state.stage === 'waiting' && pending) {
    // The step is not over until its calls are answered: its one Step Event comes when the
    // resume that ends it gets here (README: one Event per step).
    await deps.events.record(outcome.run, { type: 'Normal', reason: 'AwaitingApproval', message: `${pending.toolName} call ${pending.id} waits for approval: ${previewInput(pending.input)}` });
    return;
  }
  void deps.events.record(outcome.run, { type: 'Normal', reason: 'Step', message: summary });
  if (state.stage === 'finalizing') await deps.queue.finalize(ref);
  else await deps.queue.step(ref, state.step);
}
