// Whether a run's diff changes spec.verify.protect paths, for the finalize job and publishing:
// git lists the diff's paths (diff-patch-lists.ts), the globs judge them
// (protected-paths-changed.ts). A diff git cannot read is unknown, not clean: the callers fail
// it, but for a diff cut at the kept bound (1 MiB), whose last patch git may refuse as corrupt,
// where its headers are judged instead (what is past the cut is shown to no one, and a cut
// diff is never published).
import type { ParsedCodingRun } from '../api/index.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import { listDiffPatches } from './diff-patch-lists.ts';
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
  const lists = await listDiffPatches(diff, { launch: deps.launch, maxGitMemoryBytes: deps.clonePolicy?.maxGitMemoryBytes });
  if ('failed' in lists && !truncated) return lists;
  const paths = protectedPathsChanged(protect, diff, 'failed' in lists ? undefined : lists);
  return paths.length > 0 ? { paths } : undefined;
}
