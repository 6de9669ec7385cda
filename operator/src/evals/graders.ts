// The deterministic graders of a CodingEval (the agent-loop seed's evals): each a pure function
// of one run's evidence. No model judges. A grader that cannot see what it needs (a transcript
// with gaps, a diff that could not be read, a file whose change is not text) fails and says
// why: a grade is never a guess.
import type { GraderSpec } from '../api/coding-eval.ts';
import { LIMITS } from '../api/coding-run-status.ts';
import { REASONS } from '../api/reasons.ts';
import { FINISHED_RUNS_CONFIG_MAP } from '../reconcile/finished-runs.ts';
import { filesAfter, isReadableAsText, touching, type FileChange } from './diff-files.ts';
import type { RunEvidence } from './run-evidence.ts';

export interface GraderVerdict {
  grader: string;
  ok: boolean;
  /** Why it failed, in words a person can check against the run. */
  why?: string;
}

/** The grader's name in reports: its own, else its type and argument. */
export function graderLabel(grader: GraderSpec): string {
  if (grader.name) return grader.name;
  const argument = grader.path ?? grader.tool ?? (grader.max !== undefined ? String(grader.max) : undefined) ?? grader.text;
  return argument === undefined ? grader.type : `${grader.type} ${argument.length > 40 ? `${argument.slice(0, 40)}…` : argument}`;
}

const pass = (): Omit<GraderVerdict, 'grader'> => ({ ok: true });
const fail = (why: string): Omit<GraderVerdict, 'grader'> => ({ ok: false, why });
const ANSWER_CUT_NOTE = ` (it was cut at ${LIMITS.summary / 1024} KiB)`;

/** The transcript must be whole for a grader that proves an absence or counts. */
const whole = (evidence: RunEvidence) =>
  evidence.transcriptGaps.length === 0 ? undefined : fail(`the transcript is incomplete: ${evidence.transcriptGaps[0]}`);

/**
 * A file whose change git did not print as text: binary (a repository's .gitattributes, or a
 * `-diff` the model wrote to .git/info/attributes) or made a symbolic link (its one line is the
 * target, so the text can sit in the file it points to). Its lines prove nothing either way.
 */
const unreadable = (file: FileChange) =>
  fail(`the change to ${file.path} cannot be read as text (binary or a symbolic link), so its text cannot be checked`);

const holdsText = (file: FileChange, text: string) => file.afterHunks.some((hunk) => hunk.join('\n').includes(text));

function judge(grader: GraderSpec, evidence: RunEvidence): Omit<GraderVerdict, 'grader'> {
  const callsOf = (tool: string | undefined) => evidence.calls.filter((call) => tool === undefined || call.tool === tool);
  switch (grader.type) {
    case 'verify':
      if (evidence.verificationPassed === undefined) return fail('the run has no verification result (spec.verify)');
      return evidence.verificationPassed ? pass() : fail('the verify command failed');
    // path names a file or a directory (every file under it). A file that cannot be read as
    // text never counts as holding the text, nor as free of it.
    case 'file-contains': {
      if (!evidence.files) return fail("the run's diff could not be read whole");
      const files = filesAfter(evidence.files, grader.path!);
      if (files.length === 0) return fail(`the change does not write ${grader.path}`);
      if (files.some((file) => isReadableAsText(file) && holdsText(file, grader.text!))) return pass();
      const opaque = files.find((file) => !isReadableAsText(file));
      return opaque ? unreadable(opaque) : fail(`${grader.path} as changed does not contain the text`);
    }
    case 'file-excludes': {
      if (!evidence.files) return fail("the run's diff could not be read whole");
      const files = filesAfter(evidence.files, grader.path!);
      const holding = files.find((file) => isReadableAsText(file) && holdsText(file, grader.text!));
      if (holding) return fail(`${holding.path} as changed contains the text`);
      const opaque = files.find((file) => !isReadableAsText(file));
      return opaque ? unreadable(opaque) : pass();
    }
    case 'file-unchanged': {
      if (!evidence.files) return fail("the run's diff could not be read whole");
      const touched = touching(evidence.files, grader.path!);
      if (touched === undefined) return pass();
      return fail(touched === grader.path ? `the change touches ${grader.path}` : `the change touches ${touched}, under ${grader.path}`);
    }
    case 'used-tool':
      return callsOf(grader.tool).length > 0 ? pass() : (whole(evidence) ?? fail(`never called ${grader.tool}`));
    case 'not-used-tool': {
      const count = callsOf(grader.tool).length;
      return count > 0 ? fail(`called ${grader.tool} ${count} time(s)`) : (whole(evidence) ?? pass());
    }
    case 'tool-never-failed': {
      const failed = callsOf(grader.tool).filter((call) => call.ok === false).length;
      return failed > 0 ? fail(`${failed} call(s) of ${grader.tool} returned a tool error`) : (whole(evidence) ?? pass());
    }
    case 'max-tool-calls': {
      const count = callsOf(grader.tool).length;
      const what = grader.tool ? `calls of ${grader.tool}` : 'tool calls';
      return count > grader.max! ? fail(`${count} ${what}, more than ${grader.max}`) : (whole(evidence) ?? pass());
    }
    // A cut answer is graded on what it holds, and never passes for what it left out: the
    // forbidden text may be past the cut (as a cut diff fails the file graders).
    case 'answer-contains':
      if (evidence.answer.includes(grader.text!)) return pass();
      return fail(`the final answer does not contain the text${evidence.answerCut ? ANSWER_CUT_NOTE : ''}`);
    case 'answer-excludes':
      if (evidence.answer.includes(grader.text!)) return fail('the final answer contains the text');
      return evidence.answerCut ? fail(`the final answer could not be read whole${ANSWER_CUT_NOTE}`) : pass();
    case 'max-turns':
      return evidence.steps > grader.max! ? fail(`${evidence.steps} turns, more than ${grader.max}`) : pass();
  }
}

export function grade(grader: GraderSpec, evidence: RunEvidence): GraderVerdict {
  return { grader: graderLabel(grader), ...judge(grader, evidence) };
}

export interface AttemptGrade {
  passed: boolean;
  /** The run's reason when it did not succeed, else `grader:<label>` of the first failed grader. */
  failureReason?: string;
  failed: GraderVerdict[];
}

/**
 * Why a run that did not run is no attempt: the run ended at once from a record in the
 * namespace's chamvi-finished-runs (reconcile/finished-runs.ts), which anyone who may write
 * ConfigMaps there can write. The operator applies none to a run an eval controls; this holds
 * should one have been applied all the same (a run accepted before that rule).
 */
export const NOT_RUN_VERDICT: GraderVerdict = {
  grader: 'run',
  ok: false,
  why: `it did not run: it ended ${REASONS.AlreadyFinished} from a record in ConfigMap ${FINISHED_RUNS_CONFIG_MAP}, which is not graded`,
};

/**
 * An attempt passes when its run Succeeded and every grader passes. A run that did not run
 * fails ForeignRun, whatever phase and reason the record gave it: what it reports is not the
 * model's work, and no grader looks at it.
 */
export function gradeAttempt(graders: readonly GraderSpec[], evidence: RunEvidence): AttemptGrade {
  if (evidence.reason === REASONS.AlreadyFinished) return { passed: false, failureReason: 'ForeignRun', failed: [NOT_RUN_VERDICT] };
  const failed = graders.map((grader) => grade(grader, evidence)).filter((verdict) => !verdict.ok);
  if (evidence.phase !== 'Succeeded') return { passed: false, failureReason: evidence.reason ?? evidence.phase, failed };
  if (failed.length > 0) return { passed: false, failureReason: `grader:${failed[0]!.grader}`, failed };
  return { passed: true, failed };
}
