// spec.verify, after the model finished: put the protected paths back (restore-protected.ts),
// run the command in a clean shell through the toolbox's bash (the same exec path as the
// model's bash tool, none of the model's session state), and apply what it means
// (reconcile/verification-verdict.ts): hand the failure back to the model for another try,
// fail the run VerificationFailed, or let it succeed. Each verification is an Event and a
// transcript entry; the last one goes to status.result.verification at finalize.
import { spentLimit } from '../agent/stop-conditions.ts';
import { EVENT_REASONS, REASONS, RunFailure, durationMs, type ParsedCodingRun, type RunResult } from '../api/index.ts';
import { boundText, closingStep, DEFAULT_BOUNDS, verifyKey, type TranscriptEntry } from '../record/transcript-entry.ts';
import { keptDiffResult, type KeptDiff } from '../reconcile/kept-diff.ts';
import { NAMESPACE_ANNOTATIONS } from '../reconcile/namespace-policy.ts';
import {
  commandResultOf,
  decideVerification,
  verificationOf,
  type CommandResult,
  type Verdict,
} from '../reconcile/verification-verdict.ts';
import { SandboxError } from '../sandbox/sandbox-error.ts';
import type { ToolResponse } from '../sandbox/sandbox.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import { restoreProtected } from './restore-protected.ts';
import { runRefOf } from './run-ref.ts';
import { saveOrLetGo } from './save-if-present.ts';
import { judgeUnansweredCall } from './sandbox-lost-check.ts';
import { teamBudgetStop } from './team-token-budget.ts';
import type { RunState } from './run-state.ts';
import { deadlineOf } from './step-job.ts';

/** The client waits this much past the command's own timeout for the toolbox to answer. */
const ANSWER_GRACE_MS = 60_000;
/** A verification gets at least this long even when the run's deadline is nearer (the controller's grace covers it). */
const MIN_TIMEOUT_MS = 1_000;
/** The protected paths' import: until the run's deadline, but at least 30 s and at most 5 minutes. */
const MIN_RESTORE_TIMEOUT_MS = 30_000;
const MAX_RESTORE_TIMEOUT_MS = 5 * 60_000;

/**
 * Why the model may not take another step, or undefined: what the next step would check before
 * its call (step-job.ts), its discarded calls and its namespace's tokens for the day included,
 * so a failure is handed back only when the step it needs can run. Judged apart, a retry at
 * the last step stopped that step BudgetExceeded, and a run whose check is not required ended
 * Failed, nothing published, instead of Succeeded with its failure noted.
 */
async function budgetSpent(deps: AgentDependencies, run: ParsedCodingRun, state: RunState, now: number): Promise<string | undefined> {
  const budget = run.spec.budget;
  const limit = spentLimit({
    steps: state.step,
    discardedModelCalls: state.discardedModelCalls,
    usage: state.usage,
    budget,
    startedAt: state.startedAt,
    timeoutMs: durationMs(budget.timeout),
    now,
  });
  if (limit === 'timeout') return `spec.budget.timeout (${budget.timeout}) has passed`;
  if (limit === 'maxSteps') {
    const discarded = state.discardedModelCalls
      ? ` (${state.discardedModelCalls} of them model calls asked again after their step failed)`
      : '';
    return `all ${budget.maxSteps} steps of spec.budget.maxSteps are used${discarded}`;
  }
  if (limit === 'maxTokens') return `spec.budget.maxTokens (${budget.maxTokens}) is reached`;
  if (await teamBudgetStop(deps, run.metadata.namespace)) {
    return `namespace ${run.metadata.namespace} has used its tokens for today (annotation ${NAMESPACE_ANNOTATIONS.tokensPerDay})`;
  }
  return undefined;
}

/** status.result.verification from the state: the last verification, without the step it is keyed by. */
export function verificationResult(state: RunState): Pick<RunResult, 'verification'> {
  if (!state.verification) return {};
  const { step: _keyedBy, ...verification } = state.verification;
  return { verification };
}

/** status.result of a run whose loop ended: its kept diff and summary, the commit it cloned, its last verification. */
export function finishedResult(kept: KeptDiff, summary: string, state: RunState): RunResult {
  return {
    ...keptDiffResult(kept, summary),
    ...(state.revision ? { revision: state.revision } : {}),
    ...verificationResult(state),
  };
}

/** What the operator's run of the command returned, and whether the sandbox answered at all. */
interface CheckOutcome {
  result: CommandResult;
  /** False when the sandbox gave no answer within the command's timeout and the grace: a failed check. */
  answered: boolean;
}

/**
 * What the operator's run of the command returned; a toolbox refusal counts as a failure with
 * its message as output, and so does a sandbox that does not answer. A check (or code the model
 * wrote that it imports) can stop the toolbox (`kill -STOP $PPID`): thrown on, that made
 * finalize retry ten times, each cloning and running the check again in a shared worker slot,
 * and the run ended SandboxLost whatever spec.verify said (restore-protected.ts fails closed
 * for the same reason, by the same rule). Only a TIMEOUT of a check the toolbox was sent, in a
 * pod that still stands (judgeUnansweredCall, sandbox-lost-check.ts), is the check's: a dropped
 * transport, a closed sandbox, an aborted call or a lost node says nothing about the work, and
 * the finalize is retried for it.
 */
async function runCheck(deps: AgentDependencies, run: ParsedCodingRun, timeoutMs: number): Promise<CheckOutcome> {
  const sandbox = deps.sandboxes.for(run);
  const started = performance.now();
  const failed = (stderr: string, timedOut = false): CommandResult => ({
    exitCode: null,
    stdout: '',
    stderr,
    timedOut,
    outputCapped: false,
    durationMs: performance.now() - started,
  });
  const answerWithinMs = timeoutMs + ANSWER_GRACE_MS;
  let response: ToolResponse;
  try {
    response = await sandbox.call(
      { tool: 'bash', input: { command: run.spec.verify!.command, timeoutMs }, clean: true },
      { timeoutMs: answerWithinMs },
    );
  } catch (error) {
    if (!SandboxError.isInstance(error) || error.reason !== 'TIMEOUT') throw error;
    await judgeUnansweredCall(deps, run, error);
    const stderr = `the sandbox did not answer within ${Math.round(answerWithinMs / 1000)} s (a process may have stopped the toolbox)`;
    return { answered: false, result: failed(stderr, true) };
  }
  if (!response.ok) return { answered: true, result: failed(`the sandbox refused the command: ${response.error.message}`) };
  const result =
    commandResultOf(response.result) ??
    failed("the sandbox's answer to the check is not a bash result of the toolbox's contract: something in the sandbox wrote it");
  return { answered: true, result };
}

/**
 * Verifies the work of a run whose model has just finished. 'again' when finalize must stop: the
 * failure went back to the model (the state is saved and the next step enqueued), or the run
 * ended during the check (its state deleted; the run is let go, nothing saved or queued); 'done'
 * when the run ends now, with state.verification (and state.stop when it failed) saved.
 */
export async function verifyWork(deps: AgentDependencies, run: ParsedCodingRun, state: RunState): Promise<'again' | 'done'> {
  const verify = run.spec.verify;
  // Only a model that finished is checked; a run stopped by a budget has already failed.
  if (!verify || state.stop) return 'done';
  // A finalize redone after its verification was saved: that verdict stands.
  if (state.verification?.step === state.step) return 'done';
  const sandbox = deps.sandboxes.for(run);
  // Fail closed: without the cloned commit the protected paths cannot be put back, and a check
  // of whatever the model left there would not be a grade (a state written before commits were recorded).
  if (verify.protect.length > 0 && !state.revision) {
    throw new RunFailure(
      REASONS.VerificationFailed,
      'The commit this run cloned is not recorded, so the spec.verify.protect paths cannot be restored before the check; nothing was graded. Create the run again.',
    );
  }
  const restoreTimeoutMs = Math.max(
    MIN_RESTORE_TIMEOUT_MS,
    Math.min(MAX_RESTORE_TIMEOUT_MS, deadlineOf(run, state) - deps.now().getTime()),
  );
  const restored = state.revision ? await restoreProtected(deps, run, state.revision, sandbox, restoreTimeoutMs) : 0;
  const untilDeadline = deadlineOf(run, state) - deps.now().getTime();
  const timeoutMs = Math.max(MIN_TIMEOUT_MS, Math.min(durationMs(verify.timeout), untilDeadline));
  const { result, answered } = await runCheck(deps, run, timeoutMs);
  const verification = verificationOf(result, (state.verification?.attempts ?? 0) + 1);
  const verdict = decideVerification({
    verify,
    verification,
    // Only a failure can be handed back; a passed check needs no read of the namespace's tally.
    budgetSpent: verification.passed ? undefined : await budgetSpent(deps, run, state, deps.now().getTime()),
    cutByDeadline: answered && result.timedOut && timeoutMs < durationMs(verify.timeout),
    unanswered: !answered,
  });
  deps.logger.info(
    { attempt: verification.attempts, passed: verification.passed, answered, restored, verdict: verdict.kind },
    'verification done',
  );

  state.verification = { ...verification, step: state.step };
  if (verdict.kind === 'retry') {
    state.messages = [...state.messages, { role: 'user', content: verdict.prompt }];
    delete state.finalText;
    state.stage = 'stepping';
  } else if (verdict.kind === 'failed') {
    state.stop = { reason: verdict.reason, message: verdict.message };
  } else {
    state.verificationNote = verdict.note;
  }
  await recordVerification(deps, run, state, verdict);
  // Only over a state still there: the check may run for minutes, and a run cancelled (or
  // deleted) meanwhile had its state deleted by the stop that ended it. A plain save recreated
  // it, a retry verdict queued a step, and the publish after it found a state to save over.
  const saved = await saveOrLetGo(deps, runRefOf(run), state, {
    why: 'the run ended while its work was verified: the run is let go',
    fields: { attempt: verification.attempts },
  });
  if (!saved) return 'again';
  await deps.events.record(run, {
    type: verification.passed ? 'Normal' : 'Warning',
    reason: verification.passed ? EVENT_REASONS.VerificationPassed : EVENT_REASONS.VerificationFailed,
    message: verdict.event,
  });
  if (verdict.kind !== 'retry') return 'done';
  await deps.queue.step(runRefOf(run), state.step);
  return 'again';
}

/** The verification's transcript entry; the record is worth less than the run, so a refusal is only logged. */
async function recordVerification(deps: AgentDependencies, run: ParsedCodingRun, state: RunState, verdict: Verdict): Promise<void> {
  const verification = state.verification!;
  // After the last step recorded and the cut past MAX_RECORDED_STEPS (closingStep).
  const step = closingStep(state.step);
  // The end of the output is what says why a check failed: keep the last bytes, not the first.
  const bytes = Buffer.from(verification.outputTail, 'utf8');
  const output =
    bytes.length <= DEFAULT_BOUNDS.output
      ? { text: verification.outputTail }
      : {
          text: boundText(bytes.subarray(bytes.length - DEFAULT_BOUNDS.output).toString('utf8'), DEFAULT_BOUNDS.output).text,
          cutFrom: bytes.length,
        };
  const entry: TranscriptEntry = {
    key: verifyKey(step, verification.attempts),
    kind: 'verify',
    step,
    at: deps.now().toISOString(),
    verification: {
      attempt: verification.attempts,
      passed: verification.passed,
      ...(verification.exitCode !== undefined ? { exitCode: verification.exitCode } : {}),
      ...(verification.timedOut ? { timedOut: true } : {}),
      durationMs: verification.durationMs,
      output,
      verdict: verdict.kind,
    },
  };
  await deps.transcript.append(run, [entry]).catch((error: unknown) => {
    deps.logger.warn(
      { err: error instanceof Error ? error.message : String(error) },
      'could not record the verification in the transcript',
    );
  });
}
