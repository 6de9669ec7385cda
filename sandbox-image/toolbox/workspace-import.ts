// An archive becomes the workspace: the `import` command's work and a session import's alike
// (contract/protocol.ts). With prune globs (the restore of spec.verify.protect paths before a
// check) the model's background jobs are stopped first, so none writes over the restored
// files, and the matching paths are removed, so they become exactly the archive's.
import { stopAllJobs } from './bash-jobs.ts';
import { pruneProtected } from './protected-prune.ts';
import { importTar, type ImportResult } from './tar-import.ts';
import type { ToolboxContext } from './toolbox-context.ts';

export type WorkspaceImportResult = ImportResult & { pruned?: number };

export async function importWorkspace(
  context: ToolboxContext,
  archive: AsyncIterable<Uint8Array>,
  prune: readonly string[],
): Promise<WorkspaceImportResult> {
  if (prune.length === 0) return importTar(context, archive);
  await stopAllJobs(context);
  const pruned = await pruneProtected(context, prune);
  return { ...(await importTar(context, archive, { literal: true })), pruned };
}
