// The state a run's loop starts from, which the prepare job saves once the workspace is
// ready: no step taken, the start message as the whole conversation.
import { noFilesTouched } from '../agent/files-touched.ts';
import { buildStartMessage } from '../agent/system-prompt.ts';
import { emptyUsage } from '../agent/usage-accounting.ts';
import type { RunRef } from './agent-dependencies.ts';
import type { RunState } from './run-state.ts';
import type { RunTiming } from '../api/index.ts';

/** Where the workspace came from: the commit cloned, and for spec.continueFrom the first prompt's section about the earlier run. */
export interface StartingPoint {
  revision?: string;
  /** The ref spec.repository.revision named on the remote as the clone took it (RunState.revisionRef). */
  revisionRef?: string | undefined;
  continuation?: string;
  /** Clone, Import and Setup as the prepare job timed them, for status.timings. */
  timings?: RunTiming[];
}

/** `startedAt`: epoch ms of status.startTime, from which the deadline counts; `guidance`: the repository's, for the first prompt. */
export function startingState(ref: RunRef, startedAt: number, guidance?: string, from: StartingPoint = {}): RunState {
  return {
    version: 2,
    uid: ref.uid,
    namespace: ref.namespace,
    name: ref.name,
    stage: 'stepping',
    step: 0,
    toolCalls: 0,
    messages: [buildStartMessage(guidance, from.continuation)],
    usage: emptyUsage(),
    filesTouched: noFilesTouched(),
    startedAt,
    ...(from.revision ? { revision: from.revision } : {}),
    ...(from.revisionRef ? { revisionRef: from.revisionRef } : {}),
    ...(from.timings?.length ? { timings: from.timings } : {}),
  };
}
