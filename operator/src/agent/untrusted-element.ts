// Text the operator did not write (a repository file, command output, a model's earlier
// answer) quoted into a prompt as an element, so the model tells it from the operator's words.
// Quoted under a fixed tag, such text could end the element itself and go on as the operator:
// an AGENTS.md holding `</repository-file>` and then the system prompt's heading for the run
// author's instructions read as those instructions.
//
// So the tag carries a marker derived from what it quotes, `<repository-file-<marker> …>` …
// `</repository-file-<marker>>`, and only that closing tag ends the element (the system prompt
// says so). To end it early, the text would have to hold its own hash: a fixed point of
// truncated SHA-256, found only by trying contents. At 16 hex digits that is some 2^64 tries,
// less by the number of guesses the text holds (a 32 KiB file holds ~2^10 candidate closing
// tags, each try hashing one block past a fixed prefix: ~2^54, GPU-days); at 32 hex digits it
// stays ~2^118. With the close unforgeable, the text needs no escaping: it is quoted exactly,
// and code the model copies out of it (a summary quoting `</div>`, `<\/script>`, `# comment`)
// is the code that was there. The marker is a function of the text, not a random nonce: the
// prompt rebuilt at every step is the same bytes, and providers' prompt caches keep hitting.
// Pure.
import { createHash } from 'node:crypto';

const NAME = /^[a-z][a-z0-9-]*$/;
/** Hex digits of SHA-256 in the marker: 128 bits, see above. */
const MARKER_HEX_DIGITS = 32;
/**
 * What JSON.stringify leaves raw in a string but a reader may take for more than a character:
 * `</` (a closing tag) and the line breaks past ASCII's (U+0085, and U+2028/U+2029, line
 * terminators to JavaScript). Each written as a JSON escape, which JSON.parse reads back exactly.
 */
const ATTRIBUTE_UNSAFE = /<\/|[\u0085\u2028\u2029]/g;

/**
 * `content`, exactly, between `<tag-marker attribute="value"…>` and `</tag-marker>`, each on its
 * own line. Attribute values are JSON strings, so no quote or line break of theirs ends them.
 * The same arguments give the same bytes.
 */
export function untrustedElement(tag: string, content: string, attributes: Readonly<Record<string, string>> = {}): string {
  if (!NAME.test(tag)) throw new TypeError(`not an element name: ${JSON.stringify(tag)}`);
  const attributeText = Object.entries(attributes)
    .map(([name, value]) => {
      if (!NAME.test(name)) throw new TypeError(`not an attribute name: ${JSON.stringify(name)}`);
      return ` ${name}=${jsonAttribute(value)}`;
    })
    .join('');
  const name = `${tag}-${marker(tag, attributeText, content)}`;
  return `<${name}${attributeText}>\n${content}\n</${name}>`;
}

// The attributes are in the hash too, so two files of the same text get two markers. NUL parts
// the fields: neither the tag nor the JSON-escaped attributes can hold one.
function marker(tag: string, attributeText: string, content: string): string {
  const hash = createHash('sha256').update(tag).update('\0').update(attributeText).update('\0').update(content);
  return hash.digest('hex').slice(0, MARKER_HEX_DIGITS);
}

function jsonAttribute(value: string): string {
  return JSON.stringify(value).replace(ATTRIBUTE_UNSAFE, (unsafe) =>
    unsafe === '</' ? '<\\/' : `\\u${unsafe.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
