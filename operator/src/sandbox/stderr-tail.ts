// Keeps the last bytes a toolbox wrote to stderr, to explain a protocol failure without
// holding an unbounded buffer.
import type { Readable } from 'node:stream';

const KEEP_CHARS = 2_048;

export function collectStderrTail(stderr: Readable): () => string {
  let tail = '';
  stderr.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-KEEP_CHARS);
  });
  return () => tail.trim();
}
