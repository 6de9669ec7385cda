// How `kubectl codingrun logs` (and `run --local` as it goes) shows a transcript: a few lines per
// entry for people, or one JSON object per line for machines. Everything in an entry came from
// the model or the repository, so the text view shows it escaped (display-escape.ts) whether or
// not stdout is a terminal, and tool output compactly: one line, cut, with its size. Each line is
// cut into rows the reader's terminal holds (terminal-rows.ts), so no row of the model's text
// starts at column 0 where a record line would. Pure: the width is the caller's; without one
// (run --local's progress until it passes stderr's), lines are left whole.
import type { CodingRun } from '../api/index.ts';
import type { BoundedText, TranscriptEntry, TranscriptToolCall } from '../record/transcript-entry.ts';
import { spelledCharacter } from '../text/hidden-character.ts';
import { blankRunsCounted, collapsedBlanks, escapeForDisplay } from './display-escape.ts';
import { escapedJson } from './escaped-json.ts';
import { cutBeforeEscape, wrappedRows } from './terminal-rows.ts';

/**
 * How wide the reader's terminal is (print-logs.ts says), or Infinity when no terminal is known
 * (stdout and stderr both redirected: a file or a program reads the lines whole, and a cut at a
 * guessed width would still wrap on a narrower terminal).
 */
export interface TranscriptView {
  columns: number;
  /** The run whose transcript this is, named in `get NAME --input` where a cut input is read whole; NAME unless given. */
  run?: { name: string; namespace: string };
}

/** No terminal known: every line whole. */
export const UNCUT: TranscriptView = { columns: Number.POSITIVE_INFINITY };

/** What starts each row of the model's or a check's text. */
const TEXT_MARKER = '  | ';
/** What starts each further row of a record line too long for one (it quotes a tool's input, a message). */
const CONTINUED = '  ↳ ';

/** Characters of a tool input or output shown on its one line. */
const INLINE_CHARACTERS = 160;
/** Lines of the model's text shown per step. */
const TEXT_LINES = 12;

/**
 * One line of a field: only the blanks a shell splits at are collapsed, before escaping, so a
 * no-break space in a tool call's input is shown as <U+00A0>, not made a space that bash would
 * have split `npm test # ; curl … | sh` at.
 */
const inline = (text: string, max = INLINE_CHARACTERS): string => {
  const flat = escapeForDisplay(collapsedBlanks(text), 'inline').text;
  return flat.length <= max ? flat : `${flat.slice(0, max)}…`;
};

/** " (cut: 12345 bytes in all)" when the transcript kept only the start of a field. */
const cutNote = (field: BoundedText) => (field.cutFrom === undefined ? '' : ` (cut: ${field.cutFrom} bytes in all)`);

const seconds = (ms: number | undefined) => (ms === undefined ? '' : ` ${(ms / 1000).toFixed(1)}s`);
const clock = (iso: string) => inline(iso.slice(11, 19));
/**
 * A short field the operator writes (a tool's name, an approval id, a phase): a chunk is a
 * ConfigMap any namespace member may edit, and a newline in one printed a line of its choosing.
 */
const word = (text: string) => inline(text, 200);

function tokens(entry: TranscriptEntry): string {
  const usage = entry.usage;
  if (!usage) return '';
  const compaction = entry.compaction ? ` + ${entry.compaction.usage.totalTokens} compacting` : '';
  return `, ${usage.totalTokens} tokens (${usage.inputTokens} in, ${usage.outputTokens} out)${compaction}`;
}

/** Hex digits of a pending input's sha256 shown when the input is not shown whole: enough to tell two apart. */
const SHA256_PREFIX = 12;

function callLines(call: TranscriptToolCall, view: TranscriptView): string[] {
  const shownInput = inline(call.input.text);
  const lines = [`  → ${word(call.tool)} ${shownInput}${cutNote(call.input)}`];
  if (call.waiting) {
    const { approvalId, inputBytes, inputSha256 } = call.waiting;
    // Security #11.5: the whole sha256 is what --sha256 takes; printed beside an input cut to
    // INLINE_CHARACTERS, it was a ready approve for an input nobody read. Whole only beside the
    // whole input; otherwise a prefix, and where the input is read whole (with the sha256 to approve).
    const whole =
      call.input.cutFrom === undefined &&
      Buffer.byteLength(call.input.text, 'utf8') === inputBytes &&
      shownInput === inline(call.input.text, Infinity);
    const sha256 = whole
      ? word(inputSha256)
      : `${word(inputSha256.slice(0, SHA256_PREFIX))}…; read it whole with kubectl codingrun get ${
          view.run ? `${word(view.run.name)} -n ${word(view.run.namespace)}` : 'NAME'
        } --input`;
    lines.push(`    … waits for approval ${word(approvalId)} (input ${inputBytes} bytes, sha256 ${sha256})`);
  } else if (call.result) {
    const output = call.result.output;
    const bytes = output.cutFrom ?? Buffer.byteLength(output.text, 'utf8');
    lines.push(`    ${call.result.ok ? 'ok' : 'error'} ${inline(output.text)} [${bytes} bytes]`);
  } else {
    lines.push('    (not run)');
  }
  return lines;
}

/** Where a prose line or lines left out of the view are: `logs -o json` prints the record whole. */
const IN_JSON = '-o json has them';

/** How much of a piece of prose is shown: its first lines, each to its first characters. */
export interface ProseCut {
  lines: number;
  /**
   * Characters per line, of the record's text and of what is shown of it: a line of a megabyte
   * cost 90–260 ms to cut into rows, and a line of tag characters is ten times as long escaped.
   */
  characters: number;
  /** Where the rest is, said in the note that ends a cut line (`-o json has them`). */
  rest: string;
}

const TEXT_CUT: ProseCut = { lines: TEXT_LINES, characters: 4096, rest: IN_JSON };

/** `end`, or one less when that would split a surrogate pair (half of one is shown as <U+D83D>). */
const wholeCodePoints = (text: string, end: number) => (end < text.length && /[\ud800-\udbff]/.test(text[end - 1] ?? '') ? end - 1 : end);

/**
 * Prose (the model's text, a check's output, a summary) as the lines a person is shown, without
 * markers. A tab is shown as ^I, and a long run of blanks counted as approve counts them (`<61
 * blanks>`): a terminal draws both as blank space, and a tab as up to eight cells no width count
 * can know. Counted before escaping, which would turn U+3164 into text. A line is cut before it
 * is escaped, so a line of a megabyte costs what its first characters cost, and again after, not
 * inside an escape. Rows are cut by wrappedRows, not here: every line comes out in the form it
 * is printed in, so its width is known.
 */
export function proseLines(text: string, cut: ProseCut = { lines: Infinity, characters: Infinity, rest: '' }): string[] {
  const lines = text.trimEnd().split(/\r?\n/);
  const shown = lines.slice(0, cut.lines).map((line) => {
    const end = wholeCodePoints(line, Math.min(line.length, cut.characters));
    const counted = blankRunsCounted(line.slice(0, end)).text;
    const escaped = escapeForDisplay(counted, 'lines').text.replaceAll('\t', spelledCharacter('\t'));
    if (end === line.length && escaped.length <= cut.characters) return escaped;
    const kept = escaped.slice(0, wholeCodePoints(escaped, cutBeforeEscape(escaped, Math.min(escaped.length, cut.characters))));
    return `${kept}… (cut: ${line.length} characters in all; ${cut.rest})`;
  });
  if (lines.length > cut.lines) shown.push(`… ${lines.length - cut.lines} more lines (${cut.rest})`);
  return shown;
}

/** The model's or a check's text, line by line after TEXT_MARKER, cut to TEXT_CUT. */
function textLines(field: BoundedText): string[] {
  const shown = proseLines(field.text, TEXT_CUT).map((line) => `${TEXT_MARKER}${line}`);
  if (field.cutFrom !== undefined) shown.push(`${TEXT_MARKER}…${cutNote(field)}`);
  return shown;
}

/**
 * Lines as the rows a terminal `columns` wide shows unwrapped: the model's text goes on after
 * TEXT_MARKER, a record line after CONTINUED, which no record line starts with.
 */
const rows = (lines: string[], view: TranscriptView): string[] =>
  lines.flatMap((line) => wrappedRows(line, view.columns, line.startsWith(TEXT_MARKER) ? TEXT_MARKER : CONTINUED));

/** The rows a person reads for one entry, none wider than the view's terminal. */
export function formatEntry(entry: TranscriptEntry, view: TranscriptView = UNCUT): string[] {
  return rows(entryLines(entry, view), view);
}

function entryLines(entry: TranscriptEntry, view: TranscriptView): string[] {
  switch (entry.kind) {
    case 'step': {
      const lines = [`step ${entry.step} at ${clock(entry.startedAt ?? entry.at)}${seconds(entry.durationMs)}${tokens(entry)}`];
      if (entry.compaction) {
        const { summarisedMessages, summary } = entry.compaction;
        lines.push(`  compacted ${summarisedMessages} messages into a summary: ${inline(summary.text)}${cutNote(summary)}`);
      }
      if (entry.text?.text) lines.push(...textLines(entry.text));
      for (const call of entry.calls ?? []) lines.push(...callLines(call, view));
      if (entry.unusableCalls)
        lines.push(
          `  ! ${entry.unusableCalls} tool call(s) the model made could not be run (bad arguments, an unknown tool, or more than one step runs)`,
        );
      if (entry.message) lines.push(`  ! ${inline(entry.message, 400)}`);
      return lines;
    }
    case 'approval': {
      const approval = entry.approval!;
      const answer =
        approval.decision === 'approve'
          ? `approved (sha256 ${word(approval.sha256 ?? 'none')})`
          : `denied: ${inline(approval.reason ?? '')}`;
      // The user name comes from an annotation: shown escaped like every other recorded text.
      const by = approval.timedOut ? ' (timeout)' : approval.user ? ` by ${inline(approval.user, 200)}` : '';
      const lines = [
        `step ${entry.step} approval ${word(approval.id)} of ${word(approval.tool)} ${answer}${by} at ${clock(approval.answeredAt)} (asked ${clock(approval.requestedAt)})`,
      ];
      for (const call of entry.calls ?? []) lines.push(...callLines(call, view));
      return lines;
    }
    case 'verify': {
      const check = entry.verification!;
      const result = check.passed ? 'passed' : check.timedOut ? 'timed out' : `failed (exit ${check.exitCode ?? 'none'})`;
      const next = { passed: '', retry: '; handed back to the model', failed: '; the run fails', recorded: '; not required' }[
        check.verdict
      ];
      return [
        `verify after step ${entry.step}, attempt ${check.attempt}: ${result} in ${(check.durationMs / 1000).toFixed(1)}s${next}`,
        ...(check.passed ? [] : textLines(check.output)),
      ];
    }
    case 'end': {
      const outcome = entry.outcome!;
      return [`end at ${clock(entry.at)}: ${word(outcome.phase)} (${word(outcome.reason)}): ${inline(outcome.message, 400)}`];
    }
    case 'cut':
      return [`[transcript cut at step ${entry.step}: ${inline(entry.message ?? '', 400)}]`];
  }
}

/** The last line of `logs -f`: how the run ended, from its status. */
export function outcomeLine(run: CodingRun): string {
  const status = run.status ?? {};
  const reason = status.reason ? ` (${status.reason})` : '';
  const totals = `${status.steps ?? 0} steps, ${status.toolCalls ?? 0} tool calls, ${status.usage?.totalTokens ?? 0} tokens`;
  return `codingrun/${run.metadata.name} ${status.phase ?? 'Pending'}${reason}: ${inline(status.message ?? '', 400)} [${totals}]`;
}

/** outcomeLine as rows: the message can quote the model. */
export const outcomeRows = (run: CodingRun, view: TranscriptView = UNCUT): string[] => rows([outcomeLine(run)], view);

/** The same as JSON lines: each entry as stored, then `{"kind":"outcome",...}`; no raw control or bidi character. */
export const entryJson = (entry: TranscriptEntry): string => escapedJson(entry);
export function outcomeJson(run: CodingRun): string {
  const status = run.status ?? {};
  return escapedJson({
    kind: 'outcome',
    phase: status.phase ?? 'Pending',
    ...(status.reason ? { reason: status.reason } : {}),
    message: status.message ?? '',
    steps: status.steps ?? 0,
    toolCalls: status.toolCalls ?? 0,
    ...(status.usage ? { usage: status.usage } : {}),
  });
}
