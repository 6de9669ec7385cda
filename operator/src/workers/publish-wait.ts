// A run parked for its publish approval (approval.publish): status shows the call waiting
// with the run's diff in status.result, which is what the approver reviews, and an Event
// says so. The state is saved waiting before this is written (an answer's resume job must
// find it waiting), so a finalize whose write failed shows the wait again from its retry
// (hand-on.ts), the result rebuilt from the diff ConfigMap the approval names.
import { EVENT_REASONS, REASONS, RunFailure, type ParsedCodingRun, type RunResult } from '../api/index.ts';
import { diffSha } from '../reconcile/diff-config-map.ts';
import { storedKeptDiff } from '../reconcile/kept-diff.ts';
import { awaitApprovalStatus } from '../reconcile/run-status-transitions.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import { pendingApprovalView, previewInput } from './approval-input.ts';
import { forgetRun } from './forget-run.ts';
import { runRefOf } from './run-ref.ts';
import type { RunState } from './run-state.ts';
import { finishedResult } from './verify-work.ts';

/** The id of a publish approval, and the "tool" status.pendingApproval names. */
export const PUBLISH_APPROVAL_ID = 'publish';

/** The progress a publishing run's status writes carry. */
export const progressOf = (state: RunState) => ({
  steps: state.step,
  toolCalls: state.toolCalls,
  usage: { ...state.usage },
  ...(state.approvalWaitMs !== undefined ? { approvalWaitSeconds: Math.ceil(state.approvalWaitMs / 1000) } : {}),
});

/** Writes the wait for state.pendingApproval (the publish approval), with `result` when known, and its Event. */
export async function showPublishWait(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  result: RunResult | undefined,
): Promise<void> {
  const pending = state.pendingApproval!;
  const ref = runRefOf(run);
  const now = deps.now();
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status) => {
    if (result) status.result = result;
    return awaitApprovalStatus(status, progressOf(state), pendingApprovalView(pending), ref.name, run.metadata.generation ?? 0, now);
  });
  if (!outcome.written) return forgetRun(deps, ref);
  const branch = (pending.input as { branch?: unknown } | undefined)?.branch;
  await deps.events.record(outcome.run, {
    type: 'Normal',
    reason: EVENT_REASONS.AwaitingApproval,
    message: `publishing to branch ${String(branch)} waits for approval: ${previewInput(pending.input)}`,
  });
}

/**
 * The wait shown again by a redone finalize: the diff read back from its ConfigMap (the one
 * the approval names; the publish job checks its digest again before it pushes).
 */
export async function showPublishWaitAgain(deps: AgentDependencies, run: ParsedCodingRun, state: RunState): Promise<void> {
  const stored = await deps.resources.readDiff(run);
  // Only the diff the approval names is shown: status.result.diffSha256 is rebuilt from what is
  // read here, and the plugin checks the diff it prints against it, so an edited ConfigMap would
  // have been shown as the run's while the push (which checks the approval's digest) waited for
  // the original to be put back.
  if (stored && state.publish && diffSha(stored.diff) !== state.publish.diffSha256) {
    throw new RunFailure(
      REASONS.PublishFailed,
      "Publishing failed: the run's diff ConfigMap changed after the run ended, so what the approver would review is not what the run made; nothing was pushed",
    );
  }
  await showPublishWait(deps, run, state, stored && finishedResult(storedKeptDiff(stored), state.finalText ?? '', state));
}
