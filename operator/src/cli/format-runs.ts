// `get` output: one line per run, kubectl-style columns. Pure: the clock is a parameter, so
// ages are testable and a watch can reformat the same run as time passes.
import type { CodingRun } from '../api/index.ts';
import { approveCommand, denyCommand, pendingInput, SHOWN_INPUT_MAX_BYTES } from './approval-answer.ts';
import { blankRunsCounted, collapsedBlanks } from './display-escape.ts';
import { longInputReminder } from './long-input-reminder.ts';

export interface RunRow {
  namespace: string;
  name: string;
  phase: string;
  reason: string;
  steps: string;
  tokens: string;
  age: string;
  pending: string;
}

const PENDING_INPUT_MAX = 60;

/** kubectl's short age: 42s, 7m, 5h, 3d (and 3d4h under a week, as kubectl prints it). */
export function formatAge(from: string | undefined, now: Date): string {
  if (!from) return '<unknown>';
  const seconds = Math.max(0, Math.floor((now.getTime() - new Date(from).getTime()) / 1000));
  if (Number.isNaN(seconds)) return '<unknown>';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours}h`;
  const days = Math.floor(hours / 24);
  return days < 7 && hours % 24 ? `${days}d${hours % 24}h` : `${days}d`;
}

/** Total tokens; "~" when some call reported no usage (or no whole counts): its share is the operator's estimate. */
export function formatTokens(run: CodingRun): string {
  const usage = run.status?.usage;
  if (!usage) return '0';
  return `${usage.complete ? '' : '~'}${usage.totalTokens}`;
}

/**
 * `s12-c2 bash {"command":"npm test"}`, the input cut to keep the table's line readable (the
 * cut is marked; `get NAME` shows the whole input below the table). Only the blanks a shell
 * splits at are collapsed: a no-break space made a real one here hid that `npm test # ; curl`
 * is one word to bash; left as it is, it is shown as <U+00A0> (exact-output.ts, 'code').
 */
export function formatPending(run: CodingRun): string {
  const pending = run.status?.pendingApproval;
  if (!pending) return '';
  const input = collapsedBlanks(pending.input);
  const shown = input.length > PENDING_INPUT_MAX ? `${input.slice(0, PENDING_INPUT_MAX - 3)}...` : input;
  return `${pending.id} ${pending.toolName} ${shown}`;
}

/**
 * Below the table of `get NAME`: the call waiting for approval with its whole input, its size
 * and sha256, and how to answer. An input longer than approve shows is cut here with a mark
 * and no digest, so that the only way to a digest is `get NAME --input`, which prints it all.
 */
export function pendingApprovalLines(run: CodingRun, namespace: string): string[] {
  const pending = run.status?.phase === 'WaitingForApproval' ? run.status.pendingApproval : undefined;
  if (!pending) return [];
  const name = run.metadata.name;
  const input = pendingInput(pending);
  const header = `Pending approval ${pending.id}: ${pending.toolName} call, input ${input.bytes} bytes`;
  const readAll = `print it whole with: kubectl codingrun get ${name} -n ${namespace} --input (it prints the sha256 to approve with)`;
  if (!input.whole) {
    return [
      '',
      `${header} (NOT provably whole: status.pendingApproval has no matching size and sha256):`,
      input.text,
      `To approve it, ${readAll}; or deny it: ${denyCommand(run, namespace, pending)}`,
    ];
  }
  const call = `${pending.toolName} call ${pending.id}`;
  if (!input.shownByApprove) {
    // Counted too: the first 16 KiB of blanks pushed the start off the screen as a whole input does.
    const cut = input.text.slice(0, SHOWN_INPUT_MAX_BYTES);
    const counted = blankRunsCounted(cut);
    const shown = counted.text;
    return [
      '',
      `${header} (too long to show here; the first ${cut.length} characters${counted.runs > 0 ? ', long runs of blanks shown counted' : ''}):`,
      shown,
      ...optional(longInputReminder(call, input.text, shown)),
      `... CUT: ${readAll}.`,
    ];
  }
  const counted = blankRunsCounted(input.text);
  return [
    '',
    `${header}, sha256 ${input.sha256}${counted.runs > 0 ? `, long runs of blanks shown counted` : ''}:`,
    counted.text,
    // Said again right above the command, as run --local says it above its question: the input
    // may have scrolled its start away (long-input-reminder.ts).
    ...optional(longInputReminder(call, input.text, counted.text)),
    // With the sha256 of what was shown and the uid of the run shown: an approve that took
    // whatever is pending when it runs (after a timeout, another input) approved unseen input,
    // and one bound by name only reached a run re-created under it since, whose first call is
    // s1-c1 again with the same input when its model is scripted.
    `Answer with: ${approveCommand(run, namespace, pending, input.sha256)}   (or: ${denyCommand(run, namespace, pending)})`,
  ];
}

const optional = (line: string | undefined): string[] => (line === undefined ? [] : [line]);

export function runRow(run: CodingRun, now: Date): RunRow {
  const status = run.status ?? {};
  return {
    namespace: run.metadata.namespace,
    name: run.metadata.name,
    phase:
      run.metadata.deletionTimestamp && !status.phase?.match(/^(Succeeded|Failed|Cancelled)$/)
        ? `${status.phase ?? 'Pending'} (deleting)`
        : (status.phase ?? 'Pending'),
    reason: status.reason ?? '',
    steps: String(status.steps ?? 0),
    tokens: formatTokens(run),
    age: formatAge(run.metadata.creationTimestamp, now),
    pending: formatPending(run),
  };
}

const COLUMNS: Array<{ key: keyof RunRow; title: string; min: number }> = [
  { key: 'namespace', title: 'NAMESPACE', min: 10 },
  { key: 'name', title: 'NAME', min: 16 },
  { key: 'phase', title: 'PHASE', min: 18 },
  { key: 'reason', title: 'REASON', min: 16 },
  { key: 'steps', title: 'STEPS', min: 5 },
  { key: 'tokens', title: 'TOKENS', min: 8 },
  { key: 'age', title: 'AGE', min: 5 },
  { key: 'pending', title: 'PENDING', min: 0 },
];

/**
 * A table layout fixed from the rows known now, so lines printed later by a watch line up
 * with the header (as `kubectl get -w` does); a longer value just pushes its line wider.
 */
export class RunTable {
  private readonly columns: Array<{ key: keyof RunRow; title: string; width: number }>;

  constructor(rows: readonly RunRow[], options: { withNamespace: boolean }) {
    this.columns = COLUMNS.filter((column) => options.withNamespace || column.key !== 'namespace').map((column) => ({
      key: column.key,
      title: column.title,
      width: Math.max(column.min, column.title.length, ...rows.map((row) => row[column.key].length)),
    }));
  }

  header(): string {
    return this.line(Object.fromEntries(this.columns.map((column) => [column.key, column.title])) as unknown as RunRow);
  }

  line(row: RunRow): string {
    return this.columns
      .map((column, index) => (index === this.columns.length - 1 ? row[column.key] : row[column.key].padEnd(column.width)))
      .join('   ')
      .trimEnd();
  }
}
