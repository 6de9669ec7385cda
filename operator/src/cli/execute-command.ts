// Runs one parsed command against a RunClient and prints the result. The order of reads
// and the stop rules live here; formatting, parsing and decoding are pure modules, and the
// API calls are the client's. Returns the exit code; CliErrors propagate to main.ts.
import { isTerminal, type CodingRun } from '../api/index.ts';
import { encodeCancelAnnotation } from '../reconcile/cancel-request.ts';
import { answerAnnotations, answerFor, approveCommand, pendingInput, requireSameRun, waitingCall } from './approval-answer.ts';
import { chooseDiff } from './diff-source.ts';
import { blankRunsCounted, escapeForDisplay } from './display-escape.ts';
import { ApprovalNotWrittenError } from './errors/approval-not-written-error.ts';
import { NothingPendingError } from './errors/nothing-pending-error.ts';
import { RunNotFoundError } from './errors/run-not-found-error.ts';
import { pendingApprovalLines, RunTable, runRow, type RunRow } from './format-runs.ts';
import { longInputReminder } from './long-input-reminder.ts';
import { helpText } from './help-text.ts';
import type { Command } from './parse-arguments.ts';
import type { RunClient } from './run-client.ts';
import { printLogs } from './print-logs.ts';
import { printEvalReport } from './eval/print-eval-report.ts';

export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
  now(): Date;
  /** Aborted on Ctrl-C: a watch ends cleanly. */
  signal?: AbortSignal;
  /** Whether stdout is a terminal (get --input prints the approve command only there): process.stdout's unless a test says. */
  stdoutIsTerminal?: boolean;
}

/** Every command but run --local, which needs no cluster (local/run-locally.ts). */
export async function executeCommand(command: Exclude<Command, { command: 'run' }>, client: RunClient, io: CliOutput): Promise<number> {
  if (command.command === 'help') {
    io.out(helpText(command.topic));
    return 0;
  }
  const namespace = command.namespace ?? client.defaultNamespace;
  switch (command.command) {
    case 'get':
      if (command.input) return printPendingInput(await requireRun(client, namespace, command.name!), namespace, io);
      return command.watch
        ? watchRuns(client, io, command.allNamespaces ? undefined : namespace, command.name)
        : getRuns(client, io, command.allNamespaces ? undefined : namespace, command.name);
    case 'approve':
    case 'deny': {
      const run = await requireRun(client, namespace, command.name);
      // --uid: the run its sender read, before anything else is shown or written; the name may
      // hold another run since, with the same call id and input (a scripted model).
      requireSameRun(run, command.uid, command.command);
      // Security #11.5: an approve binds the input its sender read, so one without --sha256 only shows the call.
      if (command.command === 'approve' && command.sha256 === undefined) showPendingCall(run, namespace, command.id, io);
      const answer = answerFor(run, {
        decision: command.command,
        ...(command.id ? { id: command.id } : {}),
        ...(command.reason ? { reason: command.reason } : {}),
        ...(command.command === 'approve' && command.sha256 ? { sha256: command.sha256 } : {}),
      });
      const pending = run.status!.pendingApproval!;
      // Who answers, as the API server knows the caller: the approval policy checks it is exactly that.
      const user = await client.whoAmI();
      // The write names the uid read (with --uid, the one the sender read): the API server refuses
      // it when the name is taken by another run between this read and the patch.
      await client.setApprovalAnnotations(namespace, command.name, run.metadata.uid, answerAnnotations(answer, user));
      io.out(
        `codingrun/${command.name} ${command.command === 'approve' ? 'approved' : 'denied'} by ${user}: ${pending.toolName} call ${answer.id}`,
      );
      return 0;
    }
    case 'cancel':
      return cancelRun(client, io, namespace, command.name, command.reason);
    case 'logs':
      return printLogs(client, io, namespace, command);
    case 'eval':
      return printEvalReport(client, io, namespace, command);
    case 'diff': {
      const run = await requireRun(client, namespace, command.name);
      const configMapName = run.status?.result?.diffConfigMap;
      const configMap = configMapName ? await client.getConfigMap(namespace, configMapName) : undefined;
      const diff = chooseDiff(run, configMap);
      if (diff.warning) io.err(diff.warning);
      if (diff.text === '') io.err(`codingrun "${command.name}" changed nothing: its diff is empty`);
      else io.out(diff.text.endsWith('\n') ? diff.text.slice(0, -1) : diff.text);
      return 0;
    }
  }
}

/**
 * A bare `approve NAME`: the pending call as `get NAME` shows it (its input whole, long blank
 * runs counted, its sha256, the command that approves exactly it), then ApprovalNotWrittenError.
 * Writing the answer in the same command approved whatever was pending when it ran: after a
 * timeout's deny the model asks again with another input, and a run re-created under the name
 * starts again at s1-c1 (the command printed names its uid). A y/N question would bind what was
 * shown too, but a script has no terminal to answer it; printing the command keeps approve one
 * non-interactive step.
 */
function showPendingCall(run: CodingRun, namespace: string, id: string | undefined, io: CliOutput): never {
  const pending = waitingCall(run, id);
  for (const line of pendingApprovalLines(run, namespace).slice(1)) io.out(line);
  throw new ApprovalNotWrittenError(run, namespace, pending, pendingInput(pending));
}

/** Asks the operator to stop the run (reconcile/cancel-request.ts); a finished run is left as it is. */
async function cancelRun(client: RunClient, io: CliOutput, namespace: string, name: string, reason: string | undefined): Promise<number> {
  const run = await requireRun(client, namespace, name);
  const status = run.status ?? {};
  if (isTerminal(status.phase)) {
    io.out(`codingrun/${name} already ended ${status.phase}${status.reason ? ` (${status.reason})` : ''}: nothing to cancel`);
    return 0;
  }
  // To the run read only: one deleted and re-created under its name since is another's to cancel.
  await client.setCancelAnnotation(namespace, name, run.metadata.uid, encodeCancelAnnotation(reason));
  io.out(
    `codingrun/${name} cancel requested: it ends Cancelled within seconds, keeping its diff (kubectl codingrun diff ${name} -n ${namespace})`,
  );
  return 0;
}

async function requireRun(client: RunClient, namespace: string, name: string): Promise<CodingRun> {
  const run = await client.getRun(namespace, name);
  if (!run) throw new RunNotFoundError(namespace, name);
  return run;
}

async function getRuns(client: RunClient, io: CliOutput, namespace: string | undefined, name: string | undefined): Promise<number> {
  const runs = name ? [await requireRun(client, namespace!, name)] : (await client.listRuns(namespace)).items;
  if (runs.length === 0) {
    io.err(namespace ? `No codingruns found in namespace ${namespace}.` : 'No codingruns found.');
    return 0;
  }
  const rows = runs.map((run) => runRow(run, io.now())).sort(byNamespaceAndName);
  const table = new RunTable(rows, { withNamespace: namespace === undefined });
  io.out(table.header());
  for (const row of rows) io.out(table.line(row));
  // One run by name: the pending call in full, as approve will show it (Security #11.5).
  if (name) for (const line of pendingApprovalLines(runs[0]!, namespace!)) io.out(line);
  return 0;
}

/**
 * get NAME --input: the pending input on stdout, exactly when redirected, and on a terminal
 * escaped with its long blank runs counted as approve shows it (exact-output.ts, main.ts); its
 * size and sha256 on stderr with the approve command that binds to it and to the run (its uid).
 * Security #11.5: the approve command only when stdout is a terminal, where the input was shown
 * escaped; through a pipe its raw bytes reach a pager or a file, where a bidi override or a
 * line-erasing escape shows other text than will run, and a ready approve line beside them
 * approved an input nobody was shown for what it is.
 */
function printPendingInput(run: CodingRun, namespace: string, io: CliOutput): number {
  const pending = run.status?.phase === 'WaitingForApproval' ? run.status.pendingApproval : undefined;
  if (!pending) throw new NothingPendingError(run.metadata.name, run.status?.phase);
  const input = pendingInput(pending);
  io.out(input.text);
  if (!input.whole) {
    io.err(
      `warning: this is not provably the whole input of ${pending.toolName} call ${pending.id} (status.pendingApproval has no matching size and sha256); it cannot be approved, deny it`,
    );
    return 0;
  }
  io.err(`${pending.toolName} call ${pending.id}: ${input.bytes} bytes, sha256 ${input.sha256}`);
  if (io.stdoutIsTerminal ?? process.stdout.isTTY === true) {
    // Its start again right above the command, as get NAME says it above "Answer with:": what stdout showed may have scrolled it away.
    const reminder = longInputReminder(`${pending.toolName} call ${pending.id}`, input.text, blankRunsCounted(input.text).text);
    if (reminder !== undefined) io.err(reminder);
    io.err(`to approve exactly this input of this run: ${approveCommand(run, namespace, pending, input.sha256)}`);
    return 0;
  }
  const onTerminal = `kubectl codingrun get ${run.metadata.name} -n ${namespace} --input`;
  // What a terminal would have shown otherwise (exact-output.ts: escaped as code, long blank runs counted).
  const changed = escapeForDisplay(input.text, 'code').escaped > 0 || blankRunsCounted(input.text).runs > 0;
  if (changed)
    io.err(
      'warning: stdout is not a terminal, and this input holds control or bidirectional characters, blanks that are not ' +
        'spaces, or long runs of blanks or blank lines, which were printed as they are and may not show as what runs; ' +
        `read it on a terminal (${onTerminal}, not redirected), which shows them escaped and prints the command to approve it`,
    );
  else io.err(`to approve it, read it on a terminal (${onTerminal}, not redirected): that prints the command to approve it`);
  return 0;
}

const byNamespaceAndName = (a: RunRow, b: RunRow) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name);
/** What makes a line worth printing again: everything but the age, which changes by itself. */
const rowState = (row: RunRow) => JSON.stringify({ ...row, age: '' });

/**
 * Prints the runs, then a line each time one changes, like `kubectl get -w`. A watch that
 * ends (the server ends one every few minutes, client-node one that brought nothing for 30 s)
 * is taken up by the next from the last version it saw; only when the server says that version
 * is too old, or the watch failed, does a fresh list print what changed meanwhile. With a name,
 * returns once that run is terminal or deleted.
 */
async function watchRuns(client: RunClient, io: CliOutput, namespace: string | undefined, name: string | undefined): Promise<number> {
  const printed = new Map<string, string>();
  let table: RunTable | undefined;
  let finished = false;
  let wake: () => void = () => {};
  let headerShown = false;

  const show = (run: CodingRun, deleted = false) => {
    const row = runRow(run, io.now());
    if (deleted) row.phase = `${row.phase} (deleted)`;
    const key = `${row.namespace}/${row.name}`;
    const state = rowState(row);
    if (printed.get(key) !== state) {
      table ??= new RunTable([row], { withNamespace: namespace === undefined });
      if (printed.size === 0 && !headerShown) {
        io.out(table.header());
        headerShown = true;
      }
      printed.set(key, state);
      io.out(table.line(row));
    }
    if (name && (deleted || isTerminal(run.status?.phase))) {
      finished = true;
      wake();
    }
  };

  let resumeFrom: string | undefined;
  while (!finished && !io.signal?.aborted) {
    if (resumeFrom === undefined) {
      if (name) {
        const run = await client.getRun(namespace!, name);
        if (!run) throw new RunNotFoundError(namespace!, name);
        show(run);
        resumeFrom = run.metadata.resourceVersion;
      } else {
        const list = await client.listRuns(namespace);
        const rows = list.items.map((run) => runRow(run, io.now()));
        if (!table) {
          table = new RunTable(rows, { withNamespace: namespace === undefined });
          io.out(table.header());
          headerShown = true;
        }
        for (const run of [...list.items].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) show(run);
        resumeFrom = list.resourceVersion;
      }
    }
    if (finished) break;
    const watch = await client.watchRuns(namespace, name, resumeFrom, (type, run) => show(run, type === 'DELETED'));
    const opened = Date.now();
    const stopped = new Promise<void>((resolve) => {
      wake = resolve;
      io.signal?.addEventListener('abort', () => resolve(), { once: true });
    });
    await Promise.race([watch.ended, stopped]);
    watch.stop();
    resumeFrom = watch.resumeFrom;
    // A watch that ends at once (API server restarting) must not spin: pause before the next.
    if (!finished && !io.signal?.aborted && Date.now() - opened < 1000) await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  return 0;
}
