// A model's words in a pull request body, made inert. The body is posted as the token's user,
// and on every forge its text acts: `@org/team` notifies a team, `other/repo#42` leaves a
// reference in another repository's issue, `Fixes other/repo#42` closes that issue when the
// pull request merges, and a link or an image is followed (an image by the forge's own proxy,
// as soon as the body is shown: a way out for whatever the model read). The approver sees the
// body (publish-approval-input.ts), but should not have to read it as a forge would. Pure.
//
// The text goes in a fenced code block, shown as the model wrote it. GitHub, GitLab and Gitea
// look for mentions and references in the rendered text outside code (GitHub's and GitLab's
// reference filters skip `pre` and `code`, Gitea's markdown stripper skips code blocks), and a
// code block renders no link, image or HTML. That reads better than escaping each `@` and `#`:
// the summary stays exactly what the model said, and it is plainly the model's, set apart from
// the operator's own lines. One forge reads more than the rendered text: GitLab matches its
// closing pattern against the raw description, code blocks too. Its default pattern wants ASCII
// spaces between the keyword and the reference, so the spaces after every closing keyword
// become no-break spaces, which read the same: after every one, whatever follows, since the
// references GitLab closes are more than this file can list (`[issue:group/project/42]`,
// `[work_item:g/p/7]` and whatever form a newer GitLab adds). The body GitLab is sent then has every carriage return deleted, as GitLab
// deletes them (without-quick-actions.ts), which joined `Fi\rxes #1` or `Fixes\r o/r#42` into a
// closing statement again after its spaces were changed: they are deleted here first, so the
// text is defused as GitLab reads it. GitLab also runs a raw line that starts with `/` as a
// quick action, and its extractor skips only blocks fenced with exactly three backticks (this
// fence may be longer): the whole block is indented by one space, fences and lines alike, which
// CommonMark takes off each line again (a fence indented N spaces takes up to N off its lines),
// so the block shows the model's text as written and no raw line of it starts with `/`. An
// escape such as `\/` would be shown as typed inside code, and would not be what the approver
// approved.

/**
 * Where a closing statement could start as GitLab's default pattern reads it: a keyword (close,
 * closes, closed, closing, fix, …, implementing), an optional colon, then ASCII spaces, the
 * only blank the pattern takes there. What follows is not looked at: a lookahead for the
 * references known here (`#1`, `o/r#1`, an address, `JIRA-1`) let `Closes [issue:g/p/42]`
 * through, and "Fixed the check" with a no-break space reads as it did.
 */
const CLOSING_KEYWORD = /\b(clos(?:e[sd]?|ing)|fix(?:e[sd]|ing)?|resolv(?:e[sd]?|ing)|implement(?:s|ed|ing)?)(:?)( +)/gi;

const NO_BREAK_SPACE = '\u00a0';

/** How far the block is indented: CommonMark takes this much off each of its lines when it shows them. */
const INDENT = ' ';

/**
 * The text as a fenced code block that nothing in it can close: its fence is a run of
 * backticks longer than any in the text (CommonMark ends a block only at a fence at least as
 * long as the one that opened it), without carriage returns, with the spaces after closing
 * keywords made no-break spaces, and every line indented by one space (no raw line starts with
 * `/`; none is shown indented). withoutQuickActions leaves it as it is.
 */
export function inertModelText(modelText: string): string {
  const text = modelText.replaceAll('\r', '');
  let longestRun = 0;
  for (const run of text.matchAll(/`+/g)) longestRun = Math.max(longestRun, run[0].length);
  const fence = '`'.repeat(Math.max(3, longestRun + 1));
  const defused = text.replace(
    CLOSING_KEYWORD,
    (_, keyword: string, colon: string, spaces: string) => `${keyword}${colon}${NO_BREAK_SPACE.repeat(spaces.length)}`,
  );
  return [`${fence}text`, ...defused.split('\n'), fence].map((line) => `${INDENT}${line}`).join('\n');
}
