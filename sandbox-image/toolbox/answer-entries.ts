// How much of a listing (list_files, glob, grep) goes into one answer: the answer is one JSON
// line the operator reads with a size bound, so entries past RESULT_ENTRIES_MAX_BYTES are cut
// and the answer says `truncated`. Pure.
import { RESULT_ENTRIES_MAX_BYTES } from './contract/limits.ts';

/**
 * How many of `entries`, from the first, fit in RESULT_ENTRIES_MAX_BYTES as JSON, so the
 * answer stays a line the operator accepts; what is cut is reported as `truncated`.
 */
export function leadingWithinAnswerBytes(entries: readonly unknown[]): number {
  let bytes = 0;
  for (let index = 0; index < entries.length; index += 1) {
    bytes += Buffer.byteLength(JSON.stringify(entries[index])) + 1;
    if (bytes > RESULT_ENTRIES_MAX_BYTES) return index;
  }
  return entries.length;
}
