// How file bytes become the text the model reads and edits, and back: the UTF-8 byte order
// mark is hidden and CRLF is shown as LF, then restored on write so an edit never converts a
// file's line endings. Anything that is not clean UTF-8 text is refused as BINARY rather than
// shown garbled.
import { ToolboxError } from './toolbox-error.ts';

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export interface DecodedText {
  /** Without BOM, CRLF as LF. */
  text: string;
  hasBom: boolean;
  lineEnding: '\n' | '\r\n';
}

export function decodeText(bytes: Uint8Array, displayPath: string): DecodedText {
  if (bytes.includes(0)) throw binaryError(displayPath);
  const hasBom = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
  let raw: string;
  try {
    raw = strictUtf8.decode(hasBom ? bytes.subarray(3) : bytes);
  } catch {
    throw binaryError(displayPath);
  }
  const crlf = countOf(raw, '\r\n');
  const lf = countOf(raw, '\n') - crlf;
  // The dominant convention wins for a mixed file: it is what the next write restores.
  const lineEnding = crlf > lf ? '\r\n' : '\n';
  return { text: crlf > 0 ? raw.replaceAll('\r\n', '\n') : raw, hasBom, lineEnding };
}

export function encodeText(text: string, style: Pick<DecodedText, 'hasBom' | 'lineEnding'>): Buffer {
  const body = Buffer.from(style.lineEnding === '\r\n' ? text.replaceAll('\n', '\r\n') : text, 'utf8');
  return style.hasBom ? Buffer.concat([BOM, body]) : body;
}

export type ImageMediaType = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';

/** Recognizes the four image formats the model can see, by their magic bytes. */
export function detectImage(head: Uint8Array): ImageMediaType | undefined {
  const ascii = (start: number, end: number) => Buffer.from(head.subarray(start, end)).toString('latin1');
  if (head[0] === 0x89 && ascii(1, 4) === 'PNG') return 'image/png';
  if (head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'image/jpeg';
  if (ascii(0, 6) === 'GIF87a' || ascii(0, 6) === 'GIF89a') return 'image/gif';
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'image/webp';
  return undefined;
}

function binaryError(displayPath: string): ToolboxError {
  return new ToolboxError(
    'BINARY',
    `${displayPath} is not UTF-8 text; read it with encoding "base64" (up to 1 MiB) or inspect it with bash`,
  );
}

function countOf(text: string, needle: string): number {
  let count = 0;
  for (let index = text.indexOf(needle); index !== -1; index = text.indexOf(needle, index + needle.length)) count += 1;
  return count;
}
