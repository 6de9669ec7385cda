// Reads the elements untrusted-element.ts quotes text in, the way the system prompt tells the
// model to: an opening tag `<tag…`, its marker (the hex after `tag-`, none for a bare tag), and
// the text up to the first closing tag with that same marker. A test compares what it reads
// with what was quoted: lossless when they are equal.

export interface QuotedElement {
  /** The hex marker of the tag, '' for a bare `<tag>`. */
  readonly marker: string;
  /** The opening tag's line, without `<`, the name and `>`: its attributes. */
  readonly attributes: string;
  /** The text between the opening tag's line and the closing tag's. */
  readonly content: string;
  /** Where the element starts and ends in the text read. */
  readonly start: number;
  readonly end: number;
}

/** Every element `tag` in `text`, in order, each read from where the last one ended. */
export function quotedElements(text: string, tag: string): QuotedElement[] {
  const opening = new RegExp(`<${tag}(?:-([0-9a-f]+))?(?=[ >])([^\\n]*)>\\n`, 'g');
  const elements: QuotedElement[] = [];
  for (let match = opening.exec(text); match !== null; match = opening.exec(text)) {
    const marker = match[1] ?? '';
    const closing = `\n</${tag}${marker === '' ? '' : `-${marker}`}>`;
    const contentStart = match.index + match[0].length;
    const closeAt = text.indexOf(closing, contentStart);
    if (closeAt === -1) throw new Error(`<${tag}> at ${match.index} is never closed`);
    const end = closeAt + closing.length;
    elements.push({ marker, attributes: match[2]!, content: text.slice(contentStart, closeAt), start: match.index, end });
    opening.lastIndex = end;
  }
  return elements;
}

/** Where `text` holds anything a reader could take for a closing tag of `tag` with `marker`: any case, any spacing. */
export function closingTags(text: string, tag: string, marker: string): number[] {
  const name = marker === '' ? tag : `${tag}-${marker}`;
  return [...text.matchAll(new RegExp(`<\\s*/\\s*${name}`, 'gi'))].map((match) => match.index);
}

/** `text` with every element `tag` cut out: what the operator wrote around them. */
export function outsideElements(text: string, tag: string): string {
  let outside = '';
  let from = 0;
  for (const element of quotedElements(text, tag)) {
    outside += text.slice(from, element.start);
    from = element.end;
  }
  return outside + text.slice(from);
}
