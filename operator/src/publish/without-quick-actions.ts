// A pull request body in which GitLab finds no quick action, shown as it was written. GitLab
// runs a description's raw lines that start with `/` (`/close`, `/approve`, `/target_branch
// release`) as commands, as the token's user, on create and on every update. Its extractor
// (Gitlab::QuickActions::Extractor) first deletes every carriage return, then takes a command at
// the very start of a line (`^\/`): a line indented by one space is no command. Its docs promise
// no skipping of code, and its extractor skips only what a few regular expressions match (a
// block opened by three backticks at the line's start up to a line of exactly three, with holes
// GitLab's tracker lists: a `~~~` fence, or one closed by four backticks, is read through), so no line is trusted to be
// skipped: every line that starts with `/` gets the space, where the space is not shown.
//
// Outside a fenced code block Markdown drops a line's leading spaces (a `\/` escape showed as
// typed in code). Inside one CommonMark shows the line as written, less as many spaces of
// indentation as its opening fence has: so in a block whose fence is indented, the space is
// taken off again, and a block whose fence starts its line, and which holds such a line, is
// indented one space at its fence and at each line that starts with `/`, a space or a tab (any
// other line shows the same with the fence indented or not). The model's text is already
// indented whole (inert-model-text.ts), so this reaches only a body spec.publish.pullRequest.body
// gives, and only on a forge that runs quick actions (runsQuickActions). The body is made with
// every carriage return deleted, as GitLab deletes them before it reads and stores it: CommonMark
// ends a line at a lone CR where GitLab does not, so a space added after one would show, and a
// fence closed after one would close nothing on GitLab. Not modelled: a `/` line inside raw HTML
// (`<pre>`) or inside a code span over several lines still shows the space. Pure.
import type { ForgeKind } from './forge-kinds.ts';

/** Whether a forge runs a pull request body's lines as commands: a new kind must say. */
const RUNS_QUICK_ACTIONS: Record<ForgeKind, boolean> = { github: false, gitlab: true, gitea: false };

/** Whether the body for `forge` must be without quick actions: GitLab's, and one for a forge not known (it may be GitLab). */
export function runsQuickActions(forge: ForgeKind | undefined): boolean {
  return forge === undefined || RUNS_QUICK_ACTIONS[forge];
}

/** Whether GitLab's extractor would read `line` (one of the text's `\n`-separated lines) as starting a command. */
export function startsQuickAction(line: string): boolean {
  return line.replaceAll('\r', '').startsWith('/');
}

/** A fence that opens a code block (CommonMark: at most three spaces, then three or more backticks or tildes). */
interface Fence {
  indent: number;
  marker: string;
}

// `[^\n]*`, not `.*`: `.` stops at U+2028 and U+2029, which end no line for CommonMark.
function openingFence(line: string): Fence | undefined {
  const match = /^( {0,3})(`{3,}|~{3,})([^\n]*)$/.exec(line);
  // A backtick fence's info string holds no backtick (```a`b` is inline code, not a fence).
  if (!match || (match[2]!.startsWith('`') && match[3]!.includes('`'))) return undefined;
  return { indent: match[1]!.length, marker: match[2]! };
}

/** Whether `line` closes the block `fence` opened: the same character, at least as many, nothing after but spaces. */
function closes(fence: Fence, line: string): boolean {
  const match = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line);
  return match !== null && match[1]![0] === fence.marker[0] && match[1]!.length >= fence.marker.length;
}

const indented = (line: string) => ` ${line}`;

/** A line GitLab runs as a command, indented one space; any other line as it was. */
const inert = (line: string) => (startsQuickAction(line) ? indented(line) : line);

/**
 * A content line of a block whose fence is now indented one space, shown as before: one more
 * space where it starts with a space or a tab (CommonMark takes one off, and would split a tab),
 * and where it starts a command.
 */
const shownUnderIndentedFence = (line: string) => inert(/^[ \t]/.test(line) ? indented(line) : line);

/** A fenced block's lines (its opening fence first, then its content), none starting a command, shown the same. */
function blockWithoutQuickActions(fence: Fence, lines: readonly string[]): string[] {
  const [opening = '', ...content] = lines;
  if (!content.some(startsQuickAction)) return [...lines];
  if (fence.indent > 0) return [opening, ...content.map(inert)];
  return [indented(opening), ...content.map(shownUnderIndentedFence)];
}

/** Columns of a line's leading spaces and tabs (a tab to the next multiple of four), and whether it holds nothing else. */
function indentation(line: string): { columns: number; blank: boolean } {
  let columns = 0;
  for (const char of line) {
    if (char === ' ') columns++;
    else if (char === '\t') columns += 4 - (columns % 4);
    else return { columns, blank: false };
  }
  return { columns, blank: true };
}

/** The list item a line starts (CommonMark: up to three spaces, a marker, one to four spaces): its width and whether it is empty. */
function listItem(line: string): { width: number; paragraph: boolean } | undefined {
  if (/^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/.test(line)) return undefined; // a thematic break, not an item
  const match = /^( {0,3})([-+*]|\d{1,9}[.)])( {1,5}|\t|$)/.exec(line);
  if (!match) return undefined;
  const spaces = match[3]!.startsWith(' ') && match[3]!.length <= 4 ? match[3]!.length : 1;
  return { width: match[1]!.length + match[2]!.length + spaces, paragraph: match[3] !== '' };
}

/** `line` with up to `columns` spaces of indentation taken off (a container's). */
const outdented = (line: string, columns: number) => line.replace(new RegExp(`^ {0,${columns}}`), '');

/**
 * `text` with no line GitLab would read as a command and no carriage return (GitLab deletes
 * them: the text is read, and shown, as GitLab will), changed only at such lines (and their
 * block) and shown the same. Idempotent: the GitLab forge applies it again to the planned body,
 * whose sha256 the approver approved. Only fenced blocks at the top level take such a line: a
 * line that starts with `/` ends any list item or quote a block is in (code continues no line
 * lazily), so a fence inside a list item is followed to the item's end and left as it is.
 */
export function withoutQuickActions(text: string): string {
  const out: string[] = [];
  let block: { fence: Fence; lines: string[]; inItem: boolean } | undefined;
  let item: { width: number; paragraph: boolean } | undefined;
  for (const line of text.replaceAll('\r', '').split('\n')) {
    const { columns, blank } = indentation(line);
    if (block?.inItem && !blank && columns < item!.width) {
      out.push(...block.lines);
      block = undefined;
      item = undefined;
    }
    if (block) {
      const inner = block.inItem ? outdented(line, item!.width) : line;
      if (closes(block.fence, inner)) {
        out.push(...(block.inItem ? block.lines : blockWithoutQuickActions(block.fence, block.lines)), line);
        block = undefined;
      } else block.lines.push(line);
      continue;
    }
    if (item) {
      if (blank) {
        item.paragraph = false;
        out.push(line);
        continue;
      }
      if (columns >= item.width) {
        const fence = openingFence(outdented(line, item.width));
        if (fence) block = { fence, lines: [line], inItem: true };
        else item.paragraph = true;
        if (!fence) out.push(line);
        continue;
      }
      // Less indented: a lazy line of the item's paragraph, or the item's end.
      if (item.paragraph && listItem(line) === undefined && !openingFence(line) && !/^ {0,3}[>#]/.test(line)) {
        out.push(inert(line));
        continue;
      }
      item = undefined;
    }
    const fence = openingFence(line);
    if (fence) block = { fence, lines: [line], inItem: false };
    else {
      item = listItem(line);
      out.push(inert(line));
    }
  }
  // A block no fence closes runs to the end of the text (CommonMark).
  if (block) out.push(...(block.inItem ? block.lines : blockWithoutQuickActions(block.fence, block.lines)));
  return out.join('\n');
}
