// Text the operator did not write (a repository file, command output, a model's earlier
// answer) quoted into a prompt as an element, <tag>…</tag>, so the model tells it from the
// operator's words. Quoted as it was, such text could end the element itself and go on as the
// operator: an AGENTS.md holding `</repository-file>` and then the system prompt's heading
// for the run author's instructions read as those instructions. So inside the element:
//  - every closing tag, of any name, in any case and spacing (`</x`, `< / X`), is written
//    `<\/`: the element's own close tag comes only at its end;
//  - a line that starts with a single `#` (a top-level Markdown heading, the form of every
//    section heading the operator's prompts use) is written `\#`.
// Both are escapes the model reads for what they stand for; the system prompt says so. Pure.

const TAG = /^[a-z][a-z0-9-]*$/;
const CLOSING = /<\s*\//g;
// `m`: JavaScript starts a line after \n, \r, U+2028 and U+2029 alike, as a model may.
const TOP_HEADING = /^([ \t]*)#(?!#)/gm;

/** `text` with no closing tag and no top-level heading a model could take for the operator's. */
export function neutraliseUntrusted(text: string): string {
  return text.replace(CLOSING, '<\\/').replace(TOP_HEADING, '$1\\#');
}

/**
 * `content` inside `<tag attribute="value"…>` and `</tag>`, each on its own line. Attribute
 * values are JSON strings (no quote or line break of theirs ends them), escaped as the content.
 */
export function untrustedElement(tag: string, content: string, attributes: Readonly<Record<string, string>> = {}): string {
  if (!TAG.test(tag)) throw new TypeError(`not an element name: ${JSON.stringify(tag)}`);
  const attributeText = Object.entries(attributes)
    .map(([name, value]) => {
      if (!TAG.test(name)) throw new TypeError(`not an attribute name: ${JSON.stringify(name)}`);
      return ` ${name}=${JSON.stringify(value).replace(CLOSING, '<\\/')}`;
    })
    .join('');
  return `<${tag}${attributeText}>\n${neutraliseUntrusted(content)}\n</${tag}>`;
}
