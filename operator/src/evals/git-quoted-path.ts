// A path as git prints it in a diff header: plain, or, when it holds a control character, a
// double quote, a backslash or (with core.quotePath, git's default) any byte above 0x7f, in
// double quotes with C escapes and each such byte as three octal digits (git's quote.c).
// `café.txt` is printed "caf\303\251.txt": not JSON, so JSON.parse throws on it. Total: a
// malformed escape is kept as written, and bytes that are not UTF-8 decode to U+FFFD. Pure.

const ESCAPES: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };
const utf8 = new TextDecoder('utf-8', { fatal: false });

/** The path a header field names: `"caf\303\251.txt"` is café.txt; an unquoted field is as it is. */
export function unquoteGitPath(field: string): string {
  if (field.length < 2 || !field.startsWith('"') || !field.endsWith('"')) return field;
  const body = field.slice(1, -1);
  const bytes: number[] = [];
  for (let index = 0; index < body.length; index++) {
    const char = body[index]!;
    if (char !== '\\' || index + 1 === body.length) {
      bytes.push(...Buffer.from(char, 'utf8'));
      continue;
    }
    const next = body[index + 1]!;
    const octal = /^[0-3][0-7]{2}/.exec(body.slice(index + 1, index + 4));
    if (octal) {
      bytes.push(Number.parseInt(octal[0], 8));
      index += 3;
    } else if (next in ESCAPES) {
      bytes.push(ESCAPES[next]!);
      index += 1;
    } else bytes.push(92); // not an escape git writes: the backslash stays, the next char follows as itself
  }
  return utf8.decode(Uint8Array.from(bytes));
}
