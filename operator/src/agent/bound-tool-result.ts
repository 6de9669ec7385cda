// A tool result goes back to the model bounded to 64 KiB (chivgent's limit): one huge result
// cannot be compacted away and would blow the context window. The head and the tail are kept
// (a command's error is usually at the end) with a note saying what was cut and how to see
// the rest. A step whose results together would not fit the context window has them cut
// further (fit-step-results.ts), and the note then says so.

export const TOOL_RESULT_LIMIT_BYTES = 64 * 1024;

export interface BoundedToolResult {
  readonly text: string;
  readonly truncated: boolean;
  readonly originalBytes: number;
}

/** `why`: what limited the result, for the note; by default the 64 KiB bound. */
export function boundToolResult(
  text: string,
  limitBytes: number = TOOL_RESULT_LIMIT_BYTES,
  why = `tool results are limited to ${limitBytes} bytes`,
): BoundedToolResult {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= limitBytes) return { text, truncated: false, originalBytes: bytes.length };

  // Reserve room for the note first, sized with the largest numbers it can hold.
  const noteFor = (omitted: number) =>
    `\n\n[… ${omitted} bytes omitted: the result was ${bytes.length} bytes and ${why}. ` +
    'Ask for less: read a line range, narrow the search, or filter the command output.]\n\n';
  const noteBytes = Buffer.byteLength(noteFor(bytes.length), 'utf8');
  const room = Math.max(0, limitBytes - noteBytes);
  const headBytes = Math.floor(room * 0.75);
  const head = utf8Prefix(bytes, headBytes);
  const tail = utf8Suffix(bytes, room - Buffer.byteLength(head, 'utf8'));
  const omitted = bytes.length - Buffer.byteLength(head, 'utf8') - Buffer.byteLength(tail, 'utf8');
  return { text: head + noteFor(omitted) + tail, truncated: true, originalBytes: bytes.length };
}

// Cut on character boundaries so no replacement character (U+FFFD) appears at the seams.
function utf8Prefix(bytes: Buffer, maxBytes: number): string {
  let end = Math.min(maxBytes, bytes.length);
  while (end > 0 && end < bytes.length && isContinuationByte(bytes[end])) end -= 1;
  return bytes.subarray(0, end).toString('utf8');
}

function utf8Suffix(bytes: Buffer, maxBytes: number): string {
  let start = Math.max(0, bytes.length - maxBytes);
  while (start < bytes.length && isContinuationByte(bytes[start])) start += 1;
  return bytes.subarray(start).toString('utf8');
}

function isContinuationByte(byte: number | undefined): boolean {
  return byte !== undefined && (byte & 0xc0) === 0x80;
}
