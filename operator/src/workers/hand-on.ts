// A job redone after a crash, or one that finds its work already done: the state in Redis
// says how far the run got, and the run is handed on from there (the step that was cut off
// is finished, the next job enqueued again, or a missing approval reported). A run whose spec
// no longer parses is neither: its state is kept for the controller's InvalidSpec ending and the
// job put off (live-run.ts runNow, throwIfPutOff), as is one read before it was accepted.
import type { AgentDependencies, RunRef } from './agent-dependencies.ts';
import { afterCalls, endStep } from './end-step.ts';
import { forgetRun } from './forget-run.ts';
import { runNow, throwIfPutOff } from './live-run.ts';
import { PUBLISH_APPROVAL_ID, showPublishWaitAgain } from './publish-wait.ts';
import type { RunState } from './run-state.ts';
import { runInFlightCalls } from './run-tool-calls.ts';

/**
 * Hands on a run whose state a job already saved: enqueues its next job again (a no-op
 * when it exists), or reports the approval it waits for when the status does not show it.
 * A step in flight is finished here only when a resume began it (the resume job's retry
 * comes here); a step job's is its own (BullMQ runs a stalled one again), and a stale
 * finalize or publish redone beside it must not run its calls a second time.
 */
export async function handOn(deps: AgentDependencies, ref: RunRef, state: RunState): Promise<void> {
  if (state.inFlight?.resumed) await continueStep(deps, ref, state);
  else if (state.inFlight) await deps.queue.step(ref, Math.max(0, state.step - 1));
  else if (state.stage === 'stepping') await deps.queue.step(ref, state.step);
  else if (state.stage === 'finalizing') await deps.queue.finalize(ref, state.verification?.attempts);
  else if (state.stage === 'publishing') await deps.queue.publish(ref);
  else if (state.stage === 'waiting' && state.pendingApproval) {
    const found = await runNow(deps, ref);
    throwIfPutOff(found, 'show the approval the run waits for again');
    const run = 'run' in found ? found.run : undefined;
    if (run && run.status?.pendingApproval?.id !== state.pendingApproval.id) {
      if (state.pendingApproval.id === PUBLISH_APPROVAL_ID) await showPublishWaitAgain(deps, run, state);
      else
        await afterCalls(deps, run, state, {
          hadToolCalls: true,
          resumed: true,
          ...(state.answeredBeforeWait ? { answered: state.answeredBeforeWait } : {}),
        });
    }
  }
}

/** Finishes the step an earlier try of a job began. */
export async function continueStep(deps: AgentDependencies, ref: RunRef, state: RunState): Promise<void> {
  const found = await runNow(deps, ref);
  throwIfPutOff(found, 'finish the step an approval resumed');
  if ('ended' in found) {
    await forgetRun(deps, ref);
    return;
  }
  await endStep(deps, found.run, state, await runInFlightCalls(deps, found.run, state, true));
}
