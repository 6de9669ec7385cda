// What a verification (spec.verify) means for the run, decided from what the operator's run of
// the command returned, how many tries there were, and whether the budget allows another. Pure:
// the finalize job runs the command (workers/verify-work.ts) and applies this. Each message
// says what failed and what to change; the retry prompt quotes the output as material, since
// the repository and the model wrote it. A message or Event quotes the command and the output
// on one line, spelled out and bounded as the status and Event sinks spell them
// (text/one-line-text.ts), so what they quote cannot take the room of the operator's advice.
import { REASONS, VERIFICATION_OUTPUT_TAIL_MAX, type Verification } from '../api/index.ts';
import { oneLineText } from '../text/one-line-text.ts';
import { cutAtLine } from './cut-at-line.ts';
import { untrustedElement } from '../agent/untrusted-element.ts';

/** What the sandbox's bash returned for the command (the toolbox's BashResult, the fields read here). */
export interface CommandResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  outputCapped: boolean;
  durationMs: number;
}

/** An exit status a process can have (a 32-bit int, as waitpid reports it), well inside the integer status holds. */
const EXIT_CODE_MIN = -(2 ** 31);
const EXIT_CODE_MAX = 2 ** 31 - 1;

/**
 * The check's answer, when it has the contract's shape: code in the sandbox can write the
 * toolbox's answer line, and one with a `stdout` that is not text made finalize throw (and
 * retry), a `durationMs` of 1e400 went to status as null. The numbers are kept to integers
 * status holds: the API server refuses an exitCode of 1e19 or a durationMs of 1e300 (not an
 * integer it can read), so every status write failed and the run ended AgentFailed. Undefined
 * otherwise: the check failed.
 */
export function commandResultOf(answer: unknown): CommandResult | undefined {
  if (typeof answer !== 'object' || answer === null) return undefined;
  const { exitCode, stdout, stderr, timedOut, outputCapped, durationMs } = answer as Record<string, unknown>;
  const exitOk =
    exitCode === null ||
    (typeof exitCode === 'number' && Number.isInteger(exitCode) && exitCode >= EXIT_CODE_MIN && exitCode <= EXIT_CODE_MAX);
  const textOk = typeof stdout === 'string' && typeof stderr === 'string';
  const flagsOk = typeof timedOut === 'boolean' && typeof outputCapped === 'boolean';
  // verificationOf rounds it, so any finite duration up to the largest safe integer stays one.
  const durationOk = typeof durationMs === 'number' && durationMs >= 0 && durationMs <= Number.MAX_SAFE_INTEGER;
  if (!exitOk || !textOk || !flagsOk || !durationOk) return undefined;
  return { exitCode, stdout, stderr, timedOut, outputCapped, durationMs } as CommandResult;
}

/** The verification as status shows it: passed only for exit 0 within the timeout. */
export function verificationOf(result: CommandResult, attempts: number): Verification {
  const output = [result.stdout.trimEnd(), result.stderr.trimEnd()].filter((part) => part !== '').join('\n');
  return {
    passed: result.exitCode === 0 && !result.timedOut && !result.outputCapped,
    ...(result.exitCode !== null ? { exitCode: result.exitCode } : {}),
    ...(result.timedOut ? { timedOut: true } : {}),
    outputTail: tail(output, VERIFICATION_OUTPUT_TAIL_MAX),
    durationMs: Math.max(0, Math.round(result.durationMs)),
    attempts,
  };
}

/** The last `max` characters, starting at a line when one begins near the cut. */
function tail(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(-max);
  const newline = cut.indexOf('\n');
  return newline >= 0 && newline < 512 ? cut.slice(newline + 1) : cut;
}

export interface VerdictInput {
  verify: { command: string; required: boolean; retries: number; protect: readonly string[] };
  verification: Verification;
  /** Why no further step may run (a budget already spent), or undefined when the model may try again. */
  budgetSpent: string | undefined;
  /** True when the run's own deadline, not spec.verify.timeout, cut the command short. */
  cutByDeadline?: boolean;
  /**
   * True when the sandbox gave no answer at all, past the command's timeout and the answer
   * grace (something stopped the toolbox), so no timeout of the command's own is to blame.
   */
  unanswered?: boolean;
}

export type Verdict =
  /** The check passed: the run succeeds. */
  | { kind: 'passed'; event: string; note: string }
  /** The check failed and the model gets another try: `prompt` is its next user message. */
  | { kind: 'retry'; event: string; prompt: string }
  /** The check failed for good and is required: the run fails with this reason and message. */
  | { kind: 'failed'; event: string; reason: typeof REASONS.VerificationFailed; message: string }
  /** The check failed for good but is not required: the run succeeds, and says so. */
  | { kind: 'recorded'; event: string; note: string };

const quoted = (command: string) => `\`${cutAtLine(command, 200).text}${command.length > 200 ? '…' : ''}\``;

/** The most of the command a message or Event quotes, and of the check's output a message quotes, counted once spelled out. */
const SHOWN_COMMAND_CHARACTERS = 200;
const SHOWN_OUTPUT_CHARACTERS = 600;
/** The longest spelling of one character (`<U+E0041>`). */
const LONGEST_SPELLING = 9;

/** The command as a message or Event quotes it: on one line, spelled out, in at most 200 characters, … when cut. */
function shownCommand(command: string): string {
  const shown = oneLineText(command, SHOWN_COMMAND_CHARACTERS);
  // Whatever follows the cut fits in one more spelling's room.
  const more = oneLineText(command, SHOWN_COMMAND_CHARACTERS + LONGEST_SPELLING).length > shown.length;
  return `\`${shown}${more ? '…' : ''}\``;
}

/**
 * The end of the check's output on one line, spelled out, in at most `max` characters once
 * spelled: the last lines say why a check failed. Cut at 600 UTF-8 bytes before spelling, the
 * output quoted spelled to up to 2,400 characters (C1 controls) of a message that has 4,096.
 */
function lastOutputShown(output: string, max: number): string {
  // Each character shows as at least one, so no more than the last `max` code points can show.
  const tail = output
    .trimEnd()
    .slice(-2 * max)
    .replace(/^[\udc00-\udfff]/, '');
  let start = tail.length;
  let shown = 0;
  for (const character of [...tail].reverse()) {
    shown += oneLineText(character, LONGEST_SPELLING).length;
    if (shown > max) break;
    start -= character.length;
  }
  return oneLineText(tail.slice(start).trimStart(), max);
}

function whatHappened(verification: Verification, cutByDeadline: boolean | undefined, unanswered: boolean | undefined): string {
  if (unanswered) return 'got no answer from the sandbox';
  if (verification.timedOut) return cutByDeadline ? 'was stopped at the run deadline (spec.budget.timeout)' : 'timed out';
  if (verification.exitCode === undefined) return 'was killed (its output passed the sandbox limit)';
  if (verification.exitCode === 0) return 'exited 0 but its output passed the sandbox limit';
  return `exited ${verification.exitCode}`;
}

export function decideVerification(input: VerdictInput): Verdict {
  const { verify, verification } = input;
  const attempt = verification.attempts;
  const tries = verify.retries + 1;
  const command = shownCommand(verify.command);
  const seconds = (verification.durationMs / 1000).toFixed(1);
  if (verification.passed) {
    const note = `Verification passed: ${command} exited 0 in ${seconds}s${attempt > 1 ? ` on attempt ${attempt} of ${tries}` : ''}.`;
    return { kind: 'passed', event: note, note };
  }
  const happened = whatHappened(verification, input.cutByDeadline, input.unanswered);
  const lastLines = lastOutputShown(verification.outputTail, SHOWN_OUTPUT_CHARACTERS);
  const event = `Verification failed: ${command} ${happened} (attempt ${attempt} of ${tries}).`;

  if (attempt < tries && input.budgetSpent === undefined) {
    return {
      kind: 'retry',
      event: `${event} Handing its output back to the model.`,
      prompt: retryPrompt(input, happened, tries - attempt),
    };
  }
  const why =
    attempt < tries
      ? `no retry was possible because ${input.budgetSpent}; raise the budget to let the model use its remaining ${tries - attempt} retr${tries - attempt === 1 ? 'y' : 'ies'}`
      : verify.retries > 0
        ? `the model had ${verify.retries} retr${verify.retries === 1 ? 'y' : 'ies'} and did not fix it; read status.result.verification.outputTail and the diff, then narrow the task or raise spec.verify.retries`
        : 'read status.result.verification.outputTail and the diff, then narrow the task, or set spec.verify.retries so the model gets the failure back and tries again';
  const hint =
    verification.timedOut && !input.cutByDeadline && !input.unanswered ? `; if the check needs longer, raise spec.verify.timeout` : '';
  const detail = `${command} ${happened} on attempt ${attempt} of ${tries}${lastLines ? ` (last output: ${lastLines})` : ''}`;
  if (verify.required) {
    return {
      kind: 'failed',
      event,
      reason: REASONS.VerificationFailed,
      message: `Verification failed: ${detail}; the diff is kept. ${capitalise(why)}${hint}.`,
    };
  }
  return {
    kind: 'recorded',
    event: `${event} Not required (spec.verify.required is false): the run succeeds.`,
    note: `Verification failed but is not required: ${detail}.`,
  };
}

const capitalise = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

function retryPrompt(input: VerdictInput, happened: string, left: number): string {
  const { verify, verification } = input;
  const protectedNote =
    verify.protect.length > 0
      ? `\nThese paths are protected and are put back as they were before every check, so changing them has no effect: ${verify.protect.join(', ')}.`
      : '';
  return [
    `The operator ran the check for this task, ${quoted(verify.command)}, and it ${happened} ` +
      `(attempt ${verification.attempts} of ${verify.retries + 1}; ${left} more ${left === 1 ? 'try' : 'tries'} after this one if it fails again).`,
    `The end of its output:\n${untrustedElement('verification-output', verification.outputTail || '(no output)')}`,
    `Find the cause, fix it in the code, and answer again when you are done; the check runs again then.${protectedNote}`,
  ].join('\n\n');
}
