// One entry of a run's transcript (the run record, issue #13): what a step did, an approval's
// answer, or how the run ended. Entries are built from what the workers already hold and cut
// to fixed bounds here, each cut marked with the size of the whole, so a hostile model cannot
// make the record large: a step's entry is at most ENTRY_MAX_BYTES compressed and
// ENTRY_MAX_JSON_BYTES inflated (transcript-chunks.ts). Pure.
import type { TokenUsage } from '../agent/usage-accounting.ts';

/** A field cut to its bound keeps its first part and says how large the whole was. */
export interface BoundedText {
  text: string;
  /** UTF-8 bytes of the whole, present only when `text` is a cut. */
  cutFrom?: number;
}

export interface TranscriptToolCall {
  id: string;
  tool: string;
  /** The input as JSON. */
  input: BoundedText;
  /** Absent while the call waits for a human (or was never run). */
  result?: { ok: boolean; output: BoundedText };
  /** The call waits for approval: the input shown to approvers, by size and digest. */
  waiting?: { approvalId: string; inputBytes: number; inputSha256: string; requestedAt: string };
}

export interface TranscriptApproval {
  id: string;
  tool: string;
  decision: 'approve' | 'deny';
  reason?: string;
  /** The digest the approval named (an approve runs the call only when it is the input's). */
  sha256?: string;
  requestedAt: string;
  answeredAt: string;
  /** Who answered (the chamvi.dev/approver annotation; the API server's word with the chart's approval policy). */
  user?: string;
  /** Nobody answered within spec.approval.timeout: the operator denied the call. */
  timedOut?: boolean;
}

/** One run of spec.verify.command by the operator, after the model finished. */
export interface TranscriptVerification {
  attempt: number;
  passed: boolean;
  exitCode?: number;
  timedOut?: boolean;
  durationMs: number;
  /** The end of the command's output (status.result.verification.outputTail keeps the last one). */
  output: BoundedText;
  /** What the operator did next: handed the failure back to the model, failed the run, or let it succeed. */
  verdict: 'passed' | 'retry' | 'failed' | 'recorded';
}

export type TranscriptEntryKind = 'step' | 'approval' | 'verify' | 'end' | 'cut';

export interface TranscriptEntry {
  /** Where the entry sorts: `s000042`, `s000042-c000007` (a resume), `s000042-v000001` (a verification), `s000042-end`, `s000501-cut`. */
  key: string;
  kind: TranscriptEntryKind;
  /** The step the entry belongs to (0 before the first). */
  step: number;
  /** When the entry was written. */
  at: string;
  /** step: when the step began and how long it took (model, tools and bookkeeping). */
  startedAt?: string;
  durationMs?: number;
  /** step: the model's text. */
  text?: BoundedText;
  calls?: TranscriptToolCall[];
  /** Calls the model made that could not be run (bad arguments, unknown tool), with why. */
  unusableCalls?: number;
  /** The step's model call(s): the answer's usage, plus the compaction call's when there was one. */
  usage?: TokenUsage;
  compaction?: { summary: BoundedText; summarisedMessages: number; usage: TokenUsage };
  approval?: TranscriptApproval;
  /** verify: what the check found. */
  verification?: TranscriptVerification;
  /** end: the reason and message the run ended with, when a worker failed it. */
  outcome?: { phase: string; reason: string; message: string };
  /** cut: what was left out and why. */
  message?: string;
}

/** Steps recorded per run; past it one `cut` entry says the record stops (bounds: docs/transcript.md). */
export const MAX_RECORDED_STEPS = 500;
/**
 * Answers to approvals recorded per run; past it one `cut` entry says the rest are not. Each is
 * an entry of its own beside its step's, up to 64 a step (every call gated): unbounded, 500
 * steps' answers made 32 000 entries, about 508 MiB of ConfigMaps for one run.
 */
export const MAX_RECORDED_APPROVALS = 500;
/**
 * The step a run's closing entries (its checks, how it ended) are keyed at: its last step, or
 * past MAX_RECORDED_STEPS the `cut` entry's step. Capped at MAX_RECORDED_STEPS they sorted
 * between step 500 and the cut that says steps from 501 on are not recorded, as if the run had
 * verified and ended before the steps the cut stands for. Kept at the cut's step so the reader's
 * chunk names (transcript-chunks.ts) and the key's six digits still hold them.
 */
export const closingStep = (step: number) => Math.min(step, MAX_RECORDED_STEPS + 1);

/** The field bounds of one entry, in UTF-8 bytes; halved by encodeEntry until the entry fits. */
export interface EntryBounds {
  text: number;
  input: number;
  output: number;
  summary: number;
}

export const DEFAULT_BOUNDS: EntryBounds = { text: 8192, input: 2048, output: 2048, summary: 8192 };

const pad = (value: number) => String(Math.max(0, Math.floor(value))).padStart(6, '0');

export const stepKey = (step: number) => `s${pad(step)}`;
/**
 * A resume's entry: keyed by the approval's call number (`s42-c7`), unique per approval. The
 * number counts every call of the run, refused ones too (a model may send thousands in one
 * answer), so it may pass 999999 and take more digits: the key pattern allows them.
 */
export function resumeKey(step: number, approvalId: string): string {
  const call = /-c(\d+)$/.exec(approvalId)?.[1] ?? '0';
  return `${stepKey(step)}-c${pad(Number(call))}`;
}
/** A verification after step `step`, numbered by attempt (the first is 1). */
export const verifyKey = (step: number, attempt: number) => `${stepKey(step)}-v${pad(attempt)}`;
export const endKey = (step: number) => `${stepKey(step)}-end`;
export const cutKey = (step: number) => `${stepKey(step)}-cut`;
/**
 * The keys an entry may have: a ConfigMap's binaryData keys must match [-._a-zA-Z0-9]+. Steps
 * (maxSteps is at most 1000) and verifications take six digits, a call number six to sixteen
 * (the integers a JavaScript number holds exactly). Readers order entries by these keys' numbers,
 * not their text (transcript-entry-order.ts).
 */
export const ENTRY_KEY_PATTERN = /^s\d{6}(?:-c\d{6,16}|-v\d{6}|-end|-cut)?$/;

/** At most the first `max` bytes of `text` (never splitting a character), marked when cut. */
export function boundText(text: string, max: number): BoundedText {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= max) return { text };
  let cut = Buffer.from(text, 'utf8').subarray(0, max).toString('utf8');
  // A character split at the boundary decodes as one U+FFFD: drop it rather than show a false
  // one. When the text holds a U+FFFD there (a diff's bytes that are not UTF-8 become U+FFFD),
  // the split one decodes as itself, but whole: three bytes where one or two were cut, past `max`.
  if (cut.endsWith('\uFFFD') && (!text.startsWith(cut) || Buffer.byteLength(cut, 'utf8') > max)) cut = cut.slice(0, -1);
  return { text: cut, cutFrom: bytes };
}

const rebound = (field: BoundedText, max: number): BoundedText => {
  if (Buffer.byteLength(field.text, 'utf8') <= max) return field;
  const cut = boundText(field.text, max);
  return { text: cut.text, cutFrom: field.cutFrom ?? cut.cutFrom! };
};

/** The entry with every free-text field within `bounds` (already-cut fields keep their original size). */
export function boundEntry(entry: TranscriptEntry, bounds: EntryBounds): TranscriptEntry {
  const bounded: TranscriptEntry = { ...entry };
  if (entry.text) bounded.text = rebound(entry.text, bounds.text);
  if (entry.compaction) bounded.compaction = { ...entry.compaction, summary: rebound(entry.compaction.summary, bounds.summary) };
  if (entry.calls)
    bounded.calls = entry.calls.map((call) => ({
      ...call,
      input: rebound(call.input, bounds.input),
      ...(call.result ? { result: { ok: call.result.ok, output: rebound(call.result.output, bounds.output) } } : {}),
    }));
  if (entry.outcome) bounded.outcome = { ...entry.outcome, message: boundText(entry.outcome.message, 4096).text };
  if (entry.verification) bounded.verification = { ...entry.verification, output: rebound(entry.verification.output, bounds.output) };
  if (entry.approval?.reason) bounded.approval = { ...entry.approval, reason: boundText(entry.approval.reason, 1024).text };
  return bounded;
}

/** A tool call as the transcript keeps it: the input as JSON and, when it ran, its result. */
export function recordedCall(
  call: { toolCallId: string; toolName: string; input: unknown },
  result?: { ok: boolean; text: string },
): TranscriptToolCall {
  return {
    id: call.toolCallId,
    tool: call.toolName,
    input: { text: JSON.stringify(call.input) ?? 'null' },
    ...(result ? { result: { ok: result.ok, output: { text: result.text } } } : {}),
  };
}
