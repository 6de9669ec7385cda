// A pull request body in which GitLab finds no quick action. GitLab runs a description's raw
// lines that start with `/` (`/close`, `/approve`, `/target_branch release`) as commands, as the
// token's user, on create and on every update. Its extractor (Gitlab::QuickActions::Extractor)
// first deletes every carriage return, then takes a known command only at the very start of a
// line (`^\/`): a line indented by one space is no command.
//
// The plan applies this to every body (publish-plan.ts), whatever the forge: the body the
// approver approves (by its sha256) is then the body posted, on GitLab as elsewhere, and the
// GitLab adapter applies it again as a guard, which changes nothing in a planned body. One
// leading space is what reads best: Markdown drops it from a paragraph's line (a `\/` escape
// showed as typed in code), and a reader who copies the text gets no hidden character. The
// model's own text is already indented whole (inert-model-text.ts), so this reaches only lines
// of a body spec.publish.pullRequest.body gives. Pure.

/** Whether GitLab's extractor would read `line` (one of the text's `\n`-separated lines) as starting a command. */
export function startsQuickAction(line: string): boolean {
  return line.replaceAll('\r', '').startsWith('/');
}

/** `text` with one space before each line GitLab would read as a command, and nothing else changed. */
export function withoutQuickActions(text: string): string {
  return text
    .split('\n')
    .map((line) => (startsQuickAction(line) ? ` ${line}` : line))
    .join('\n');
}
