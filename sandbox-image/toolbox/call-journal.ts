// The call journal: each finished mutating call's response, kept under the toolbox home by the
// caller's call id, so the same call sent again (a worker died after the toolbox answered and
// before it saved the result, and the step was redone) is answered from here instead of
// editing or running a second time. Exactly once per call id, as long as the entry is kept.
//
// The home is outside the workspace (never in the diff) but writable by the sandbox's own
// code, so nothing here is trusted: an entry is found by the sha256 of the call id (no path
// comes from the caller), answers only the very request it was written for (sha256 of tool and
// input), is read only when it is a small regular file, and must parse as a response of the
// contract. Forging one takes code running in the sandbox, which could change the workspace
// directly anyway; the answer goes only to the model of this run. The journal keeps the newest
// JOURNAL_MAX_ENTRIES entries and drops older ones, so it stays bounded.
import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import { BASH_MAX_TIMEOUT_MS, JOURNAL_ENTRY_MAX_BYTES, JOURNAL_MAX_ENTRIES } from './contract/limits.ts';
import { decodeResponse, encodeResponse } from './contract/protocol.ts';
import type { ToolResponse } from './contract/tool-results.ts';
import { changesSandbox, type ToolName } from './contract/tool-schemas.ts';
import { writeFileAtomic } from './atomic-write.ts';
import { openToRead } from './bounded-read.ts';
import { withFileLock } from './file-locks.ts';

/** A repeat waits for the first try still running in another process (a redo while the old session finishes). */
const REPEAT_WAIT = {
  limitMs: BASH_MAX_TIMEOUT_MS + 30_000,
  message: 'The same call is still running in the sandbox from an earlier try; try again later',
};

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The sha256 of what was asked: a repeat must ask for exactly the same thing. */
export function requestDigest(tool: string, input: unknown): string {
  return sha256(JSON.stringify([tool, input]));
}

/**
 * Runs `work` once per call id: the first time its response is journaled, a repeat of the same
 * request gets that response back. Calls without an id, and reads (TOOL_EFFECTS), just run.
 */
export async function journaled(
  home: string,
  request: { tool: ToolName; input: unknown; callId?: string | undefined },
  work: () => Promise<ToolResponse>,
): Promise<ToolResponse> {
  if (request.callId === undefined || !changesSandbox(request.tool)) return work();
  const directory = path.join(home, 'journal');
  const name = sha256(request.callId).slice(0, 40);
  const digest = requestDigest(request.tool, request.input);
  return withFileLock(
    home,
    `journal:${name}`,
    async () => {
      const usable = await journalDirectory(directory);
      const kept = usable ? await readEntry(path.join(directory, name), digest) : undefined;
      if (kept) return kept;
      const response = await work();
      // The call happened; failing to journal it must not turn its answer into an error.
      if (usable) await writeEntry(directory, name, digest, response).catch(() => undefined);
      return response;
    },
    REPEAT_WAIT,
  );
}

/** The journal directory, made when missing; false when something else (a symlink, a file) sits there. */
async function journalDirectory(directory: string): Promise<boolean> {
  await mkdir(directory, { recursive: true, mode: 0o700 }).catch(() => undefined);
  const stats = await lstat(directory).catch(() => undefined);
  return stats?.isDirectory() === true;
}

/** The journaled response for this request, or undefined (none, another request's, or not a sound entry). */
export async function readEntry(file: string, digest: string): Promise<ToolResponse | undefined> {
  let handle;
  try {
    // A symlink or a FIFO planted in the journal is never followed or waited on.
    handle = await openToRead(file);
  } catch {
    return undefined;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile() || stats.size > JOURNAL_ENTRY_MAX_BYTES) return undefined;
    const buffer = Buffer.alloc(stats.size);
    const { bytesRead } = await handle.read(buffer, 0, stats.size, 0);
    const text = buffer.subarray(0, bytesRead).toString('utf8');
    const newline = text.indexOf('\n');
    if (newline < 0 || text.slice(0, newline) !== digest) return undefined;
    const reading = decodeResponse(text.slice(newline + 1));
    return reading.kind === 'response' ? reading.response : undefined;
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

async function writeEntry(directory: string, name: string, digest: string, response: ToolResponse): Promise<void> {
  const bytes = Buffer.from(`${digest}\n${encodeResponse(undefined, response)}`);
  if (bytes.length > JOURNAL_ENTRY_MAX_BYTES) return;
  await writeFileAtomic(path.join(directory, name), bytes);
  await prune(directory);
}

/** Drops the oldest entries beyond the bound (anything in the directory counts, leftovers included). */
async function prune(directory: string): Promise<void> {
  const names = await readdir(directory).catch(() => [] as string[]);
  if (names.length <= JOURNAL_MAX_ENTRIES) return;
  const aged = await Promise.all(
    names.map(async (entry) => ({ entry, mtime: (await lstat(path.join(directory, entry)).catch(() => undefined))?.mtimeMs ?? 0 })),
  );
  aged.sort((a, b) => a.mtime - b.mtime || a.entry.localeCompare(b.entry));
  await Promise.all(
    aged.slice(0, aged.length - JOURNAL_MAX_ENTRIES).map(({ entry }) => unlink(path.join(directory, entry)).catch(() => undefined)),
  );
}
