// resume: a human answered a pending approval. Run (or deny) the parked call, then the
// calls after it (which may park the run again), and go on as after any step. An approved call
// may run for minutes (`./deploy.sh`): a run ended meanwhile (a cancel's ending, a deletion),
// whose stop deleted the state, gets none of the calls after it (saveOrLetGo), but the answer
// and the call it ran are still recorded: its Approved/Denied Event and transcript entry.
import { protectingSandbox } from './protecting-sandbox.ts';
import { EVENT_REASONS, FAILURE_MESSAGES, REASONS, RunFailure, type ParsedCodingRun } from '../api/index.ts';
import type { ApprovalAnswer } from '../reconcile/run-agent.ts';
import { refusedApprovalStatus } from '../reconcile/run-status-transitions.ts';
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { approvalRefusal } from './approval-input.ts';
import { answeredApproval, answeredBy } from './answered-approval.ts';
import { endStep, recordEndedStep } from './end-step.ts';
import { forgetRun } from './forget-run.ts';
import { handOn } from './hand-on.ts';
import { answerPublishApproval } from './publish-job.ts';
import { PUBLISH_APPROVAL_ID } from './publish-wait.ts';
import { runToActOn, throwIfPutOff } from './live-run.ts';
import { saveOrLetGo } from './save-if-present.ts';
import { toolCallObserver } from './run-metrics.ts';
import { runInFlightCalls } from './run-tool-calls.ts';
import { deniedResult, executeToolCall, withRunDeadline } from './tool-execution.ts';
import { deadlineOf } from './step-job.ts';
import { approvalWaitShiftMs } from '../reconcile/approval-wait.ts';
import { DEFAULT_MAX_APPROVAL_WAIT_SECONDS } from '../config/operator-config.ts';

export async function runResumeJob(deps: AgentDependencies, ref: RunRef, answer: ApprovalAnswer): Promise<void> {
  const state = await deps.states.load(ref);
  if (!state) throw new RunFailure(REASONS.StateLost, FAILURE_MESSAGES.stateGone);
  // Read fresh, not from what this process remembers (kube/recent-runs.ts serves a copy up to
  // 2 s old, and a cancel changes no generation): an approved call may be `./deploy.sh`, and a
  // cancel asked for while it waited in the queue stops it, as does a spec that no longer parses
  // (the controller ends that run InvalidSpec from its state). Before the hand-on below too, which
  // may finish a resumed step's calls. Thrown, not returned: the job is kept to be tried again
  // (a cancel withdrawn lets the answer act; otherwise its id, kept an hour once done, would
  // make the controller's queueing of the same answer a no-op) until the ending removes it.
  const found = await runToActOn({ getRun: deps.getRunFresh ?? deps.getRun }, ref);
  throwIfPutOff(found, `act on the ${answer.decision} of approval ${answer.id}`);
  const pending = state.pendingApproval;
  if (state.stage !== 'waiting' || !pending || pending.id !== answer.id) {
    // A step a resume began is finished here only by a retry of that resume (the same answer).
    // Another answer to the same call (the timeout's deny after an approve, a second approver)
    // found the state moved on while that step's calls still ran, and ran them a second time.
    const resumed = state.inFlight?.resumed ? state.inFlight.record?.approval : undefined;
    if (resumed && (resumed.id !== answer.id || answerClaim(resumed) !== answerClaim(answer))) {
      deps.logger.info(
        { approval: answer.id, decision: answer.decision },
        'approval answered already by another answer; this one is dropped',
      );
      return;
    }
    // Answered already; the try that did may have died before it handed the run on.
    await handOn(deps, ref, state);
    return;
  }
  if ('ended' in found) {
    await forgetRun(deps, ref);
    return;
  }
  const { run } = found;
  // Security #11.5: an approve runs the call only when it names the sha256 of this very input.
  const refusal = approvalRefusal(answer, pending);
  if (refusal) {
    await refuseApproval(deps, run, refusal);
    return;
  }
  // One answer acts: another (the timeout's deny beside an approve whose call still runs, or
  // beside a publish approve whose push is queued) found the state waiting too. That one hands
  // the run on once it is done; this job stops here.
  const claim = await deps.states.claimAnswer(ref.uid, pending.id, answerClaim(answer));
  if (!claim) {
    deps.logger.info(
      { approval: pending.id, decision: answer.decision },
      'approval answered already by another answer; this one is dropped',
    );
    return;
  }
  if (pending.id === PUBLISH_APPROVAL_ID) {
    await answerPublishApproval(deps, run, state, answer);
    return;
  }
  const call = { toolCallId: pending.toolCallId, toolName: pending.toolName, input: pending.input };
  // The human's wait ends with the answer, not with the approved call: its run time is the run's.
  const answeredAt = deps.now();
  // Human time is not the run's time: the wait moves the run's start (and so its deadline) on,
  // by no more than the controller moves its own (approval-wait.ts): the run's waits count up
  // to maxApprovalWaitSeconds in all, and the rest was the run's time.
  const waitedMs = Math.max(0, answeredAt.getTime() - Date.parse(pending.requestedAt));
  const shiftMs = approvalWaitShiftMs(
    state.approvalWaitMs ?? 0,
    waitedMs,
    deps.maxApprovalWaitMs ?? DEFAULT_MAX_APPROVAL_WAIT_SECONDS * 1000,
  );
  // The answer claimed again: this job is retried, and a try before may have run the call and
  // then failed to save its result (a Redis blip, its lock lost). Past the deadline the call is
  // then not said to have not run (tool-execution.ts redo). The claim is in Redis before the
  // call; BullMQ's attemptsMade misses a try that stalled.
  const redo = claim === 'again';
  const result =
    answer.decision === 'approve'
      ? // What the run has left once the wait moved its deadline on (saved below).
        await withRunDeadline(deadlineOf(run, state) + shiftMs - answeredAt.getTime(), (deadline) =>
          executeToolCall(
            protectingSandbox(deps.sandboxes.for(run), run),
            call,
            toolCallObserver(deps),
            deadline,
            state.step,
            undefined,
            undefined,
            redo,
          ),
        )
      : deniedResult(call, answer.reason?.trim() || 'no reason given');
  if (answer.decision === 'deny') deps.metrics.toolCalls.inc({ tool: call.toolName, outcome: 'denied' });
  state.approvalWaitMs = (state.approvalWaitMs ?? 0) + waitedMs;
  state.startedAt += shiftMs;
  // From here on the answered call counts as done: a retry runs only the calls after it.
  state.toolCalls += 1;
  state.stage = 'stepping';
  delete state.pendingApproval;
  state.inFlight = {
    calls: pending.remaining,
    results: [],
    earlier: [...pending.results, result],
    hadToolCalls: true,
    toolNames: [call, ...pending.remaining].map((each) => each.toolName),
    text: '',
    resumed: true,
    record: {
      startedAt: deps.now().toISOString(),
      answered: call,
      approval: answeredApproval(pending, answer, answeredAt),
    },
  };
  // Only over a state still there: the run may have ended while the approved call ran, and its
  // stop deleted the state. Saved back, it would count in the namespace's state bytes again, and
  // the calls after it would run against the sandbox the ending is deleting, then a step be queued.
  // What was answered, and what the approved call did, is recorded all the same: the deploy ran.
  const saved = await saveOrLetGo(deps, ref, state, {
    why: 'the run ended while its approval was answered: the calls after it are not run and the run is let go',
    fields: { approval: pending.id, decision: answer.decision },
    recordFirst: async () => {
      await recordAnswer(deps, run, pending, answer);
      await recordEndedStep(deps, run, state);
    },
  });
  if (!saved) return;
  await recordAnswer(deps, run, pending, answer);
  await endStep(deps, run, state, await runInFlightCalls(deps, run, state));
}

/** The answer's Event: a transition, so kubectl describe shows who approved or denied which call. */
async function recordAnswer(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  pending: { id: string; toolName: string },
  answer: ApprovalAnswer,
): Promise<void> {
  await deps.events.record(run, {
    type: 'Normal',
    reason: answer.decision === 'approve' ? EVENT_REASONS.Approved : EVENT_REASONS.Denied,
    message: `${pending.toolName} call ${pending.id} ${answer.decision === 'approve' ? 'approved' : 'denied'}${answeredBy(answer)}${
      answer.decision === 'deny' ? `: ${answer.reason ?? 'no reason given'}` : ''
    }`,
  });
}

/** The call stays pending (state untouched); the run says why on a Warning Event and in status.message. */
async function refuseApproval(deps: AgentDependencies, run: ParsedCodingRun, message: string): Promise<void> {
  const outcome = await deps.status.write(run.metadata.namespace, run.metadata.name, run.metadata.uid, (status) =>
    refusedApprovalStatus(status, message),
  );
  await deps.events.record(outcome.run ?? run, { type: 'Warning', reason: EVENT_REASONS.ApprovalRefused, message });
}

/** What identifies an answer for its claim: the same decision sent again (a retried job) holds it again. */
function answerClaim(answer: Pick<ApprovalAnswer, 'decision' | 'sha256' | 'timedOut' | 'user'>): string {
  return [answer.decision, answer.sha256 ?? '', answer.timedOut ? 'timeout' : '', answer.user ?? ''].join(':');
}
