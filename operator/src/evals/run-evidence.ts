// What the graders may look at of one finished run, gathered from the run's own record: its
// status (phase, reason, final answer, steps, verification), its diff, and its transcript's
// tool calls (record/, read with the transcript's own reader). Pure: the controller reads the
// objects, this turns them into evidence.
import type { CodingRun } from '../api/coding-run.ts';
import type { Transcript } from '../record/transcript-chunks.ts';
import type { TranscriptEntry } from '../record/transcript-entry.ts';
import { parseDiffFiles, type FileChange } from './diff-files.ts';

export interface RecordedCall {
  tool: string;
  /** false: the call returned a tool error; undefined: it never ran (denied while waiting, or cut off). */
  ok: boolean | undefined;
}

export interface RunEvidence {
  phase: string;
  reason?: string;
  /** The final answer (status.result.summary); '' when there is none. */
  answer: string;
  /** answer is only the beginning of a longer final answer (status.result.summaryTruncated). */
  answerCut: boolean;
  steps: number;
  calls: RecordedCall[];
  /** Why the transcript may miss calls (an unreadable entry, a cut record); empty when it is whole. */
  transcriptGaps: string[];
  /** The change, file by file; undefined when the diff could not be read whole. */
  files: FileChange[] | undefined;
  /** status.result.verification.passed, when the run had spec.verify. */
  verificationPassed?: boolean;
}

/**
 * What runEvidence reads of a transcript entry: its kind, step and message, and each call's
 * tool and outcome. The texts, most of a transcript, are left out, so grading keeps little of
 * what it reads (the eval controller's TranscriptReader keeps this).
 */
export function gradedParts(entry: TranscriptEntry): TranscriptEntry {
  const calls = entry.calls?.map((call) => ({
    id: call.id,
    tool: call.tool,
    input: { text: '' },
    ...(call.result ? { result: { ok: call.result.ok, output: { text: '' } } } : {}),
  }));
  return {
    key: entry.key,
    kind: entry.kind,
    step: entry.step,
    at: entry.at,
    ...(entry.message !== undefined ? { message: entry.message } : {}),
    ...(calls ? { calls } : {}),
  };
}

/**
 * Evidence of a finished run. `fullDiff` is the whole diff when the run's status holds only a
 * cut of it (read from its diff ConfigMap); undefined there means it could not be read.
 */
export function runEvidence(run: CodingRun, transcript: Transcript, fullDiff?: string): RunEvidence {
  const status = run.status ?? {};
  const result = status.result;
  const byStep = new Map<number, RecordedCall[]>();
  const gaps = [...transcript.problems];
  for (const entry of transcript.entries) {
    if (entry.kind === 'cut') gaps.push(entry.message ?? `the transcript stops at step ${entry.step}`);
    if (entry.message && entry.kind === 'step' && /tool calls left out/.test(entry.message)) gaps.push(entry.message);
    if (!entry.calls) continue;
    // Calls are told apart by position, not id: one answer may hold two calls of one id (the
    // second did not run, repeated-call-ids.ts), and a later step may use an id
    // again. A resume's entry (same step, sorted after the step's) holds the step's last calls
    // again, from the answered one on, with their results: the last word counts.
    const recorded = entry.calls.map((call) => ({ tool: call.tool, ok: call.result?.ok }));
    const step = byStep.get(entry.step) ?? [];
    step.splice(Math.max(0, step.length - recorded.length), recorded.length, ...recorded);
    byStep.set(entry.step, step);
  }
  const diff = result?.diffTruncated ? fullDiff : (result?.diff ?? '');
  const verificationPassed = result?.verification?.passed;
  return {
    phase: status.phase ?? 'Pending',
    ...(status.reason ? { reason: status.reason } : {}),
    answer: result?.summary ?? '',
    answerCut: result?.summaryTruncated === true,
    steps: status.steps ?? 0,
    calls: [...byStep.values()].flat(),
    transcriptGaps: gaps,
    files: diff === undefined ? undefined : parseDiffFiles(diff),
    ...(verificationPassed !== undefined ? { verificationPassed } : {}),
  };
}
