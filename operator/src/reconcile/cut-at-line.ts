// Bounding free text at a line boundary: by UTF-8 bytes (a message, a prompt) or by the bytes
// it takes in the API server's stored JSON (result.diff, result.summary: text/stored-json-bytes.ts). Pure.
import { storedTextPrefix } from '../text/stored-json-bytes.ts';

/**
 * Cuts text to at most `limit` UTF-8 bytes, at a line boundary when one is near. Bytes, not
 * characters: status bounds are sizes (a diff of non-ASCII text cut at 64 Ki characters
 * would be up to 192 KiB), and a byte bound is a character bound too, as the CRD schema
 * counts. The cut never splits a character.
 */
export function cutAtLine(text: string, limit: number): { text: string; truncated: boolean } {
  if (text.length <= limit / 3 || (text.length <= limit && Buffer.byteLength(text) <= limit)) return { text, truncated: false };
  // At most `limit` characters can fit, so only that much is ever encoded.
  const bytes = Buffer.from(text.slice(0, limit), 'utf8');
  let end = Math.min(limit, bytes.length);
  while (end > 0 && end < bytes.length && ((bytes[end] ?? 0) & 0xc0) === 0x80) end -= 1;
  const cut = bytes.subarray(0, end).toString('utf8');
  if (cut.length === text.length) return { text, truncated: false };
  const lastNewline = cut.lastIndexOf('\n');
  return { text: lastNewline > cut.length * 0.8 ? cut.slice(0, lastNewline + 1) : cut, truncated: true };
}

/**
 * Cuts text to at most `limit` bytes as the API server stores it (Go's JSON: `<` and a control
 * character take six bytes, `"` two), at a line boundary when one is near: for what status
 * holds of text a model or a repository wrote (result.diff, result.summary), where a cut by
 * UTF-8 bytes let a 64 KiB diff of `<` take 384 KiB of the run in etcd. A stored byte bound is a
 * UTF-8 byte and a character bound too (the CRD schema's maxLength). The cut never splits a
 * character, and only what can fit is read.
 */
export function cutAtLineInStoredBytes(text: string, limit: number): { text: string; truncated: boolean } {
  // No character takes more than six bytes stored.
  if (text.length <= limit / 6) return { text, truncated: false };
  const { end } = storedTextPrefix(text, limit);
  if (end === text.length) return { text, truncated: false };
  const cut = text.slice(0, end);
  const lastNewline = cut.lastIndexOf('\n');
  return { text: lastNewline > cut.length * 0.8 ? cut.slice(0, lastNewline + 1) : cut, truncated: true };
}
