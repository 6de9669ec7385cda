// An archive becomes the workspace: the `import` command's work and a session import's alike
// (contract/protocol.ts). With prune globs (the restore of spec.verify.protect paths before a
// check) what the model left running is stopped first (leftover-processes.ts), so nothing
// writes over the restored files, and the matching paths are removed, so they become exactly
// the archive's.
import { stopLeftoverProcesses } from './leftover-processes.ts';
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
  await stopLeftoverProcesses(context);
  const pruned = await pruneProtected(context, prune);
  return { ...(await importTar(context, archive, { literal: true })), pruned };
}
