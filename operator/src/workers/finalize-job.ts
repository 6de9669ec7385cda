// finalize: take the diff from the sandbox, keep the whole of it (up to 1 MiB) in a
// ConfigMap and a bounded copy in status.result, and write the terminal phase. The
// controller then removes the pod. Also runs for a run stopped by a budget, so its
// partial diff is kept.
import { LIMITS, REASONS } from '../api/index.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { finishStatus } from '../reconcile/finish-status.ts';
import { STATE_LOST_MESSAGE, failRun, liveRun, observeFinished, type AgentDependencies, type RunRef } from './agent-dependencies.ts';
import { cutAtLine, parseShortstat, type DiffStats } from './diff-stats.ts';

interface BashResult {
  exitCode: number | null;
  stdout: string;
  stdoutTruncated: boolean;
  stdoutBytes: number;
  stdoutLog: string;
}

async function bash(sandbox: Sandbox, command: string): Promise<BashResult> {
  const response = await sandbox.call({ tool: 'bash', input: { command, timeoutMs: 120_000 } });
  if (!response.ok) throw new Error(`taking the diff failed: ${response.error.code}: ${response.error.message}`);
  return response.result as BashResult;
}

/** The change against HEAD, new files included (intent-to-add), cut at 1 MiB. */
export async function takeDiff(sandbox: Sandbox): Promise<{ diff: string; truncated: boolean; stats: DiffStats }> {
  const stats = await bash(sandbox, 'git add -A --intent-to-add . >/dev/null 2>&1; git diff --no-color --no-ext-diff HEAD | wc -c; git diff --no-color --no-ext-diff --shortstat HEAD');
  const [bytesLine = '0', statLine = ''] = stats.stdout.trim().split('\n');
  const totalBytes = Number(bytesLine.trim()) || 0;
  const out = await bash(sandbox, `git diff --no-color --no-ext-diff HEAD | head -c ${LIMITS.fullDiff}`);
  let diff = out.stdout;
  if (out.stdoutTruncated) {
    // The result shows only head and tail of a long stream; the whole is in the log file.
    const read = await sandbox.call({ tool: 'read_file', input: { path: out.stdoutLog, encoding: 'base64' } });
    if (!read.ok) throw new Error(`reading the diff failed: ${read.error.code}: ${read.error.message}`);
    diff = Buffer.from((read.result as { content: string }).content, 'base64').toString('utf8');
  }
  return { diff, truncated: totalBytes > LIMITS.fullDiff, stats: parseShortstat(statLine) };
}

export async function runFinalizeJob(deps: AgentDependencies, ref: RunRef): Promise<void> {
  const state = await deps.states.load(ref);
  if (!state) {
    await failRun(deps, ref, REASONS.StateLost, STATE_LOST_MESSAGE);
    return;
  }
  const run = await liveRun(deps, ref);
  if (!run) {
    await deps.states.delete(ref.uid);
    return;
  }
  const { diff, truncated, stats } = await takeDiff(deps.sandboxes.for(run));
  const diffConfigMap = diff.length > 0 ? await deps.resources.writeDiff(run, diff) : undefined;
  const shown = cutAtLine(diff, LIMITS.diff);
  const summary = cutAtLine(state.finalText ?? state.stop?.message ?? '', LIMITS.summary).text;
  const phase = state.stop ? 'Failed' : 'Succeeded';
  const reason = state.stop?.reason ?? REASONS.Completed;
  const message = state.stop?.message ?? `Finished in ${state.step} step(s): ${stats.filesChanged} file(s) changed.`;
  const now = deps.now();
  const outcome = await deps.status.write(ref.namespace, ref.name, ref.uid, (status, current) => {
    status.steps = state.step;
    status.toolCalls = state.toolCalls;
    status.usage = { ...state.usage };
    status.result = {
      summary,
      diff: shown.text,
      diffTruncated: shown.truncated || truncated,
      ...(diffConfigMap ? { diffConfigMap } : {}),
      ...stats,
    };
    return finishStatus(status, phase, reason, message, current.metadata.generation ?? 0, now);
  });
  if (outcome.written) {
    await deps.events.record(outcome.run, { type: phase === 'Succeeded' ? 'Normal' : 'Warning', reason, message });
    observeFinished(deps, outcome.run, phase, reason);
  }
  state.stage = 'done';
  await deps.states.delete(ref.uid);
  await deps.sandboxes.release(ref.uid);
}
