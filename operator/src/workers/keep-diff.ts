// Keeping a run's diff as it ends, whoever ends it: the finalize job (from the pod), a worker
// that fails the run, the controller through its RunAgent port (a deadline, a lost agent, a
// cancel). From the live sandbox when it answers, stored whole in the run's diff ConfigMap;
// else the last snapshot the steps stored there (snapshotDiff, after each step that may have
// changed files); else none. Never throws: what could not be kept is said in the result.
import type { ParsedCodingRun } from '../api/index.ts';
import { apiRefusal } from '../kube/api-errors.ts';
import { NO_DIFF, countDiff, type KeptDiff } from '../reconcile/kept-diff.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import type { AgentLogger } from './agent-dependencies.ts';
import type { RunResources } from './run-resources.ts';
import { takeDiff } from './take-diff.ts';

/** How long taking the diff from a sandbox may take before the snapshot is used instead (each call, and all of them). */
export const TAKE_DIFF_TIMEOUT_MS = 30_000;

export interface DiffKeepingDependencies {
  resources: RunResources;
  logger: Pick<AgentLogger, 'warn'>;
}

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** Stores the whole diff in the run's ConfigMap; a refusal (a quota on ConfigMaps) is said in notStored rather than thrown. */
async function store(
  deps: DiffKeepingDependencies,
  run: ParsedCodingRun,
  diff: string,
): Promise<Pick<KeptDiff, 'configMap' | 'notStored'>> {
  if (diff.length === 0) return {};
  try {
    return { configMap: await deps.resources.writeDiff(run, diff) };
  } catch (error) {
    const refusal = apiRefusal(error);
    if (!refusal) throw error;
    return {
      notStored:
        `the API server refused its ConfigMap (HTTP ${refusal.code}: ${refusal.message}); status.result.diff holds the first 64 KiB. ` +
        'Raise the namespace ResourceQuota for configmaps (or ask an admin about the policy that refused it).',
    };
  }
}

/**
 * The diff from the sandbox, stored; the finalize job's path and the first choice of every
 * other ending. base: the commit the run cloned (the state's), when the caller has it.
 */
export async function takeFinalDiff(
  deps: DiffKeepingDependencies,
  run: ParsedCodingRun,
  sandbox: Sandbox,
  base?: string,
): Promise<KeptDiff> {
  // Bounded as a whole (it is up to three calls): an ending waits at most this long for a sandbox.
  const { diff, truncated, stats } = await takeDiff(
    sandbox,
    { timeoutMs: TAKE_DIFF_TIMEOUT_MS, signal: AbortSignal.timeout(TAKE_DIFF_TIMEOUT_MS) },
    base,
  );
  return { source: 'final', diff, truncated, ...stats, ...(await store(deps, run, diff)) };
}

/** The last diff stored for the run, or none. */
export async function snapshotDiff(deps: DiffKeepingDependencies, run: ParsedCodingRun): Promise<KeptDiff> {
  try {
    const kept = await deps.resources.readDiff(run);
    if (!kept) return NO_DIFF;
    return { source: 'snapshot', diff: kept.diff, truncated: false, ...countDiff(kept.diff), configMap: kept.configMap };
  } catch (error) {
    deps.logger.warn({ err: errorText(error) }, 'could not read the diff snapshot');
    return NO_DIFF;
  }
}

/**
 * The latest diff there is: from the sandbox when asked and it answers, else the snapshot.
 * base: the commit the run cloned (its state's), when there is one. The diff is taken against
 * it, so work the model committed is kept, and it is recorded as the diff's revision.
 */
export async function keepRunDiff(
  deps: DiffKeepingDependencies,
  run: ParsedCodingRun,
  sandbox: Sandbox | undefined,
  base?: string,
): Promise<KeptDiff> {
  const against = base ? { revision: base } : {};
  if (sandbox) {
    try {
      return { ...(await takeFinalDiff(deps, run, sandbox, base)), ...against };
    } catch (error) {
      deps.logger.warn({ err: errorText(error) }, 'could not take the diff from the sandbox; using the last snapshot');
    }
  }
  return { ...(await snapshotDiff(deps, run)), ...against };
}
