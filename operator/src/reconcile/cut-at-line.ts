// Bounding free text for status at a line boundary (result.diff, result.summary). Pure.

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
