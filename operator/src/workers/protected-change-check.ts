// Whether a run's diff changes spec.verify.protect paths, for the finalize job and publishing:
// git lists the diff's paths (diff-patch-lists.ts), the globs judge them
// (protected-paths-changed.ts). A diff git cannot read is unknown, not clean: the callers fail
// it. Of a diff cut at the kept bound (1 MiB), whose last patch git refuses as corrupt, git reads
// the whole patches before that one (patches-before-cut.ts) and the last is judged by its header
// alone: what is past the cut is shown to no one, and a cut diff is never published.
import type { ParsedCodingRun } from '../api/index.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import { listDiffPatches } from './diff-patch-lists.ts';
import { patchesBeforeCut } from './patches-before-cut.ts';
import { protectedPathsChanged } from './protected-paths-changed.ts';

/** The protected paths the diff changes (at least one), or why git could not read it. */
export type ProtectedChange = { paths: string[] } | { failed: string };

/** The protected change in `diff`, or undefined when it changes none (or the run protects nothing). */
export async function protectedChangeIn(
  deps: Pick<AgentDependencies, 'launch' | 'clonePolicy'>,
  run: ParsedCodingRun,
  diff: string,
  truncated: boolean,
): Promise<ProtectedChange | undefined> {
  const protect = run.spec.verify?.protect ?? [];
  if (protect.length === 0 || diff === '') return undefined;
  const whole = truncated ? patchesBeforeCut(diff) : diff;
  // A cut in the first patch leaves git nothing to read: its header alone is judged.
  const lists =
    whole === ''
      ? undefined
      : await listDiffPatches(whole, { launch: deps.launch, maxGitMemoryBytes: deps.clonePolicy?.maxGitMemoryBytes });
  if (lists && 'failed' in lists) return lists;
  const paths = protectedPathsChanged(protect, diff, lists);
  return paths.length > 0 ? { paths } : undefined;
}
