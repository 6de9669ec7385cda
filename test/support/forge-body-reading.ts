// How forges read a pull request body, for the tests of what the operator posts: the lines in
// fenced code blocks as CommonMark shows them (where no forge renders a mention, a reference, a
// link or an image) apart from the lines outside, and the lines GitLab runs as quick actions.

/**
 * The body's parts as CommonMark reads them: the lines inside fenced code blocks, as they are
 * shown, and the lines outside. A fence opens with three or more backticks, indented at most
 * three spaces, and closes at a line of at least as many; a fence indented N spaces takes up
 * to N spaces off each of its lines when it shows them.
 */
export function fencedAndOutside(body: string): { fenced: string[]; outside: string[] } {
  const fenced: string[] = [];
  const outside: string[] = [];
  let open: { length: number; indent: number } | undefined;
  for (const line of body.split('\n')) {
    const fence = /^( {0,3})(`{3,})\s*(\S*)$/.exec(line);
    if (open === undefined && fence) open = { length: fence[2]!.length, indent: fence[1]!.length };
    else if (open !== undefined && fence && fence[2]!.length >= open.length && fence[3] === '') open = undefined;
    else if (open === undefined) outside.push(line);
    else fenced.push(line.replace(new RegExp(`^ {0,${open.indent}}`), ''));
  }
  return { fenced, outside };
}

/**
 * The lines GitLab runs as quick actions, as its extractor (Gitlab::QuickActions::Extractor)
 * finds them: it deletes every carriage return, then takes a line that starts with `/` and a
 * command's name (any word here). Its skipping of code (only blocks fenced with exactly three
 * backticks) is left out: no line of a body may start a command, in a block or not.
 */
export function gitlabCommandLines(body: string): string[] {
  return body
    .replaceAll('\r', '')
    .split('\n')
    .filter((line) => /^\/\w/.test(line));
}
