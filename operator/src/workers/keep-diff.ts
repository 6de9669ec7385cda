// Keeping a run's diff as it ends, whoever ends it: the finalize job (from the pod), a worker
// that fails the run, the controller through its RunAgent port (a deadline, a lost agent, a
// cancel). From the live sandbox when it answers, stored whole in the run's diff ConfigMap;
// else the last snapshot the steps stored there (snapshotDiff, after each step that may have
// changed files), kept only when it is a diff the operator recorded; else none. Never throws:
// what could not be kept is said in the result. Whichever it is, it is stored as the run's
// final diff, which no later snapshot replaces; an ending never takes a diff it finds marked
// final for its own (anyone who may update the ConfigMap can mark it: reconcile/diff-write.ts).
import type { ParsedCodingRun } from '../api/index.ts';
import { apiRefusal } from '../kube/api-errors.ts';
import { diffReachesCut } from '../reconcile/diff-config-map.ts';
import {
  NO_DIFF,
  changedDiffNote,
  countDiff,
  recordedDiff,
  storedDiffSource,
  type KeptDiff,
  type RecordedDiff,
} from '../reconcile/kept-diff.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import type { CleanShell } from '../../../sandbox-image/toolbox/contract/protocol.ts';
import type { AgentLogger } from './agent-dependencies.ts';
import type { RunResources } from './run-resources.ts';
import type { RunState } from './run-state.ts';
import { takeDiff } from './take-diff.ts';

/** How long taking the diff from a sandbox may take before the snapshot is used instead (each call, and all of them). */
export const TAKE_DIFF_TIMEOUT_MS = 30_000;

export interface DiffKeepingDependencies {
  resources: RunResources;
  logger: Pick<AgentLogger, 'warn'>;
}

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * Stores `taken` whole as the run's final diff, over whatever the ConfigMap holds (`written`:
 * the ConfigMap its last snapshot went to, patched in one request). A refusal (a quota on
 * ConfigMaps) is said in notStored rather than thrown.
 */
export async function storeFinalDiff(
  deps: DiffKeepingDependencies,
  run: ParsedCodingRun,
  taken: KeptDiff,
  written?: string,
): Promise<KeptDiff> {
  if (taken.diff.length === 0) return taken;
  try {
    // A final write is never refused (decideDiffWrite): the ConfigMap named holds `taken`.
    const stored = await deps.resources.writeDiff(run, taken.diff, { kind: 'final', ...(written ? { written } : {}) });
    return { ...taken, configMap: stored.configMap };
  } catch (error) {
    const refusal = apiRefusal(error);
    if (!refusal) throw error;
    return {
      ...taken,
      notStored:
        `the API server refused its ConfigMap (HTTP ${refusal.code}: ${refusal.message}); status.result.diff holds the first 64 KiB. ` +
        'Raise the namespace ResourceQuota for configmaps (or ask an admin about the policy that refused it).',
    };
  }
}

/**
 * The diff from the sandbox, not yet stored. Bounded as a whole (it is up to three calls): an
 * ending waits at most TAKE_DIFF_TIMEOUT_MS for a sandbox, where a call's default deadline held
 * a worker slot for half an hour when the model's code had stopped the toolbox.
 * base: the commit the run cloned (the state's), when the caller has it.
 * Its counts are those of the diff kept (of its first 1 MiB when it is cut), never a count the
 * sandbox prints: code there can make git print any shortstat, and filesChanged is what the
 * finished run's message reports.
 * clean: true sweeps what the model left running first (finalize's take); by default it is
 * left running (takeDiff).
 */
export async function takeSandboxDiff(sandbox: Sandbox, base?: string, clean?: CleanShell): Promise<KeptDiff> {
  const { diff, truncated, notUtf8 } = await takeDiff(
    sandbox,
    { timeoutMs: TAKE_DIFF_TIMEOUT_MS, signal: AbortSignal.timeout(TAKE_DIFF_TIMEOUT_MS), ...(clean ? { clean } : {}) },
    base,
  );
  return { source: 'final', diff, truncated, ...(notUtf8 ? { notUtf8 } : {}), ...countDiff(diff) };
}

/** The diff from the sandbox, stored: the first choice of every ending but finalize (which skips a write: finalize-job.ts). */
export async function takeFinalDiff(
  deps: DiffKeepingDependencies,
  run: ParsedCodingRun,
  sandbox: Sandbox,
  base?: string,
): Promise<KeptDiff> {
  return storeFinalDiff(deps, run, await takeSandboxDiff(sandbox, base));
}

/**
 * The last diff stored for the run, when it is one the operator recorded (`recorded`:
 * storedDiffSource), marked final: a step still running when its sandbox stopped answering
 * may yet store a snapshot, which would no longer be the diff the ender's status names. A diff
 * that matches nothing recorded was put there by someone who may update the ConfigMap (a
 * planted diff, maybe marked final): it is not kept, and notStored says so, since the ender
 * would otherwise certify it in diffSha256 and publish would push it. A step's snapshot that
 * landed before the state recording it as stored was saved is the run's: its sha256 was saved
 * as pending before the write (diff-snapshot.ts).
 */
export async function snapshotDiff(deps: DiffKeepingDependencies, run: ParsedCodingRun, recorded: RecordedDiff): Promise<KeptDiff> {
  let stored: Awaited<ReturnType<RunResources['readDiff']>>;
  try {
    stored = await deps.resources.readDiff(run);
  } catch (error) {
    deps.logger.warn({ err: errorText(error) }, 'could not read the diff snapshot');
    return NO_DIFF;
  }
  if (!stored) return NO_DIFF;
  const source = storedDiffSource(stored.diff, recorded);
  if (source === undefined) {
    deps.logger.warn({ configMap: stored.configMap }, 'the diff ConfigMap holds no diff the run stored; not kept');
    return { ...NO_DIFF, notStored: changedDiffNote(stored.configMap) };
  }
  const kept: KeptDiff = {
    source,
    diff: stored.diff,
    // A snapshot is take-diff's text, without the change's size or bytes. One as long as the
    // 1 MiB cut is taken for that cut (as isCutDiff takes it), else its counts read as the whole
    // change's (a change not UTF-8 whose text reached the cut reads as cut too, the safe way
    // round). A U+FFFD may be one that replaced a byte of another encoding, so it is marked,
    // the safe way round (a UTF-8 file holding U+FFFD is then not published either).
    truncated: diffReachesCut(stored.diff),
    ...(stored.diff.includes('\uFFFD') ? { notUtf8: true } : {}),
    ...countDiff(stored.diff),
    configMap: stored.configMap,
  };
  if (stored.kind === 'final') return kept;
  try {
    // One patch of the ConfigMap just read, carrying the diff checked above.
    return {
      ...kept,
      configMap: (await deps.resources.writeDiff(run, stored.diff, { kind: 'final', written: stored.configMap })).configMap,
    };
  } catch (error) {
    // Still there as read, only unmarked: a late snapshot could replace it, which the readers would then refuse.
    deps.logger.warn({ err: errorText(error) }, 'could not mark the diff snapshot final');
    return kept;
  }
}

/**
 * The latest diff there is: from the sandbox when asked and it answers, else the snapshot.
 * state: the run's (when it is still there). Its revision is the commit the run cloned: the
 * diff is taken against it, so work the model committed is kept, and it is recorded as the
 * diff's revision. Its diffSnapshot and pendingDiffSha256 (the last snapshot stored, and one
 * being stored), with the run's own status.result.diffSha256 (an earlier ending's), are what a
 * snapshot read back must match (snapshotDiff).
 */
export async function keepRunDiff(
  deps: DiffKeepingDependencies,
  run: ParsedCodingRun,
  sandbox: Sandbox | undefined,
  state?: Pick<RunState, 'revision' | 'diffSnapshot' | 'pendingDiffSha256'>,
): Promise<KeptDiff> {
  const base = state?.revision;
  const against = base ? { revision: base } : {};
  if (sandbox) {
    try {
      return { ...(await takeFinalDiff(deps, run, sandbox, base)), ...against };
    } catch (error) {
      deps.logger.warn({ err: errorText(error) }, 'could not take the diff from the sandbox; using the last snapshot');
    }
  }
  return { ...(await snapshotDiff(deps, run, recordedDiff(state, run.status?.result, run.status?.steps))), ...against };
}
