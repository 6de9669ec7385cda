// After a step whose calls may have changed files, the run's diff is stored in its diff
// ConfigMap (the same one the finalize job writes), so an ending that finds the sandbox
// gone (a lost pod, a deadline the kubelet enforced) still keeps the work up to the last
// step. Taken through the run's kept toolbox session (two calls on an open exec), written
// only when it changed (its sha256 is kept in the state). Best effort: a snapshot that
// fails is logged and the step goes on; so is one refused because the ConfigMap is marked
// final, which no snapshot replaces: the run's ending stored its diff there (a step that
// outlived the run), or someone who may update the ConfigMap set the mark, and they could
// overwrite the snapshot anyway (reconcile/diff-write.ts). A refused one is not recorded in
// the state: the sha an ending checks the ConfigMap against is the last one stored (keep-diff.ts).
import { changesSandbox } from '../../../sandbox-image/toolbox/contract/tool-schemas.ts';
import type { ParsedCodingRun } from '../api/index.ts';
import { diffSha } from '../reconcile/diff-config-map.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import type { RunState } from './run-state.ts';
import { takeDiff } from './take-diff.ts';
import { TAKE_DIFF_TIMEOUT_MS } from './keep-diff.ts';

/** Whether any of a step's calls may have changed the workspace (the contract's TOOL_EFFECTS says which tools may). */
export const mayChangeFiles = (calls: readonly { toolName: string }[]) => calls.some((call) => changesSandbox(call.toolName));

/** Stores the run's diff when it differs from the last one stored; records its sha256 in the state (saved by the caller). */
export async function snapshotDiffAfterStep(deps: AgentDependencies, run: ParsedCodingRun, state: RunState): Promise<void> {
  try {
    const { diff } = await takeDiff(deps.sandboxes.for(run), { timeoutMs: TAKE_DIFF_TIMEOUT_MS }, state.revision);
    const sha = diffSha(diff);
    if (sha === state.diffSnapshot?.sha256) return;
    // An empty diff after a non-empty one (the agent undid its change) replaces it too.
    if (diff.length === 0 && state.diffSnapshot === undefined) return;
    const stored = await deps.resources.writeDiff(run, diff, { kind: 'snapshot', written: state.diffSnapshot?.configMap });
    if (stored.outcome !== 'written') {
      deps.logger.info({ configMap: stored.configMap }, 'diff snapshot not stored: its ConfigMap is marked as holding the final diff');
      return;
    }
    state.diffSnapshot = { sha256: sha, configMap: stored.configMap };
  } catch (error) {
    deps.logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'could not store the diff snapshot');
  }
}
