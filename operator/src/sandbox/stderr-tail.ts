// Keeps the last bytes a toolbox wrote to stderr, to explain a protocol failure without
// holding an unbounded buffer. The toolbox itself writes a line there at most (main.ts: why it
// failed), but code in the sandbox can write to its stderr as fast as the link allows, and
// every byte read is the operator's one thread's time (every namespace's steps, the leader's
// lease). So the reading is bounded too: past maxBytes the owner is told (it ends the process)
// and nothing more is copied.
import type { Readable } from 'node:stream';

const KEEP_BYTES = 2_048;
/** More stderr than any toolbox writes; past it the writer is code in the sandbox. */
export const STDERR_MAX_BYTES = 1_048_576;

export interface StderrTailOptions {
  /** Called once, when the process has written more than maxBytes. */
  onOverflow?: () => void;
  maxBytes?: number;
}

export function collectStderrTail(stderr: Readable, options: StderrTailOptions = {}): () => string {
  const maxBytes = options.maxBytes ?? STDERR_MAX_BYTES;
  let tail = Buffer.alloc(0);
  let read = 0;
  stderr.on('data', (chunk: Buffer) => {
    if (read > maxBytes) return;
    read += chunk.length;
    // Only the end of a chunk is copied (concat copies), and no chunk is kept.
    tail = Buffer.concat([tail, chunk.subarray(-KEEP_BYTES)]).subarray(-KEEP_BYTES);
    if (read > maxBytes) options.onOverflow?.();
  });
  return () => tail.toString('utf8').trim();
}
