// After a step's calls that may have changed files, the run's diff is stored in its diff
// ConfigMap (the same one the finalize job writes), so an ending that finds the sandbox
// gone (a lost pod, a deadline the kubelet enforced) still keeps the work up to the last
// step. Taken through the run's kept toolbox session (two calls on an open exec), written
// only when it changed (its sha256 is kept in the state).
//
// An ending without the sandbox keeps the ConfigMap's diff only when its sha256 is one the
// state recorded (keep-diff.ts): anyone who may update ConfigMaps in the namespace can write
// there. So the new diff's sha256 is saved in the state as pending before the write, and
// recorded as stored after it (saved with the step's end): a worker that dies between the
// write and that save leaves a diff the state names, which the ending keeps. The save of
// the pending sha256 is the step's own save of its one call when it ran only one (that save
// waits for the diff); otherwise one more save, only when the diff changed (run-tool-calls.ts).
//
// Best effort: a snapshot that fails is logged and the step goes on; so is one refused because
// the ConfigMap is marked final, which no snapshot replaces: the run's ending stored its diff
// there (a step that outlived the run), or someone who may update the ConfigMap set the mark,
// and they could overwrite the snapshot anyway (reconcile/diff-write.ts). A refused one is not
// recorded in the state.
import { changesSandbox } from '../../../sandbox-image/toolbox/contract/tool-schemas.ts';
import type { ParsedCodingRun } from '../api/index.ts';
import { diffSha } from '../reconcile/diff-config-map.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import type { RunState } from './run-state.ts';
import { takeDiff } from './take-diff.ts';
import { TAKE_DIFF_TIMEOUT_MS } from './keep-diff.ts';

/** Whether any of a step's calls may have changed the workspace (the contract's TOOL_EFFECTS says which tools may). */
export const mayChangeFiles = (calls: readonly { toolName: string }[]) => calls.some((call) => changesSandbox(call.toolName));

/** A diff to store as the run's snapshot, its sha256 already pending in the state. */
interface TakenSnapshot {
  diff: string;
  sha256: string;
  /** The pending sha256 is new to the state: it must be saved before the diff is written. */
  unsaved: boolean;
}

/**
 * The run's diff, when it differs from the last one stored: its sha256 is set as pending in
 * `state` (pendingDiffSha256), for the caller to save before storeSnapshot. Undefined when
 * there is nothing to store, or the diff could not be taken (logged).
 */
async function takeSnapshot(deps: AgentDependencies, run: ParsedCodingRun, state: RunState): Promise<TakenSnapshot | undefined> {
  try {
    const { diff } = await takeDiff(deps.sandboxes.for(run), { timeoutMs: TAKE_DIFF_TIMEOUT_MS }, state.revision);
    const sha = diffSha(diff);
    // Unchanged only when no write is pending: one that may have landed left the ConfigMap
    // holding a diff the state still names as pending, which an ending would keep after the
    // agent undid it. Written again, it is replaced and the pending sha256 cleared.
    if (state.pendingDiffSha256 === undefined) {
      if (sha === state.diffSnapshot?.sha256) return undefined;
      // An empty diff after a non-empty one (the agent undid its change) replaces it too.
      if (diff.length === 0 && state.diffSnapshot === undefined) return undefined;
    }
    // Saved by an earlier try of this step, whose write may or may not have landed: written again.
    const unsaved = state.pendingDiffSha256 !== sha;
    state.pendingDiffSha256 = sha;
    return { diff, sha256: sha, unsaved };
  } catch (error) {
    deps.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'could not take the diff snapshot');
    return undefined;
  }
}

/**
 * Writes a taken snapshot, once its pending sha256 is saved, and records it in `state` as the
 * one stored (saved by the caller). A write that fails leaves it pending: it may have landed,
 * and the next step writes it again if the diff is still the same.
 */
async function storeSnapshot(deps: AgentDependencies, run: ParsedCodingRun, state: RunState, taken: TakenSnapshot): Promise<void> {
  try {
    const stored = await deps.resources.writeDiff(run, taken.diff, { kind: 'snapshot', written: state.diffSnapshot?.configMap });
    if (stored.outcome !== 'written') {
      deps.logger.info({ configMap: stored.configMap }, 'diff snapshot not stored: its ConfigMap is marked as holding the final diff');
      delete state.pendingDiffSha256;
      return;
    }
    state.diffSnapshot = { sha256: taken.sha256, configMap: stored.configMap };
    delete state.pendingDiffSha256;
  } catch (error) {
    deps.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'could not store the diff snapshot');
  }
}

/**
 * Stores the run's diff after a step's calls, when it changed: its sha256 saved as pending
 * first (`save`, the whole state), then the write. `owed`: the state must be saved here anyway
 * (the result of the step's one call, whose save waited for the diff), so the pending sha256
 * rides on that save.
 */
export async function snapshotDiffAfterCalls(
  deps: AgentDependencies,
  run: ParsedCodingRun,
  state: RunState,
  save: () => Promise<void>,
  owed: boolean,
): Promise<void> {
  const taken = await takeSnapshot(deps, run, state);
  if (owed || taken?.unsaved === true) await save();
  if (taken) await storeSnapshot(deps, run, state, taken);
}
