// Serializes writes and edits of one file inside a toolbox process, so several edits of the
// same file sent concurrently over one serve session all apply instead of overwriting each
// other (read-modify-write).
const tails = new Map<string, Promise<unknown>>();

export async function withFileLock<T>(key: string, work: () => Promise<T>): Promise<T> {
  const previous = tails.get(key) ?? Promise.resolve();
  const current = previous.then(work, work);
  const tail = current.catch(() => undefined);
  tails.set(key, tail);
  try {
    return await current;
  } finally {
    if (tails.get(key) === tail) tails.delete(key);
  }
}
