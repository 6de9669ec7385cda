// spec.continueFrom: whether a run may start from where another run left off, and from what.
// Pure: the prepare job reads the source run (in the follow-up's own namespace only) and its
// diff ConfigMap, this decides, and the prepare job clones the source's commit and applies the
// diff. Every refusal is a RunFailure with a message that says what to change: InvalidSpec, or
// ContinueFromReplaced for a source that is not the run this one was accepted with
// (status.continuedFrom, reconcile/continue-from-pin.ts). The diff ConfigMap must be that
// run's own (its controller ownerReference and labels name the uid), so the pinned uid holds
// for everything read of the source.
//
// The source's summary and task are what a model and a run author wrote: they go into the
// first user message as quoted material, never into the system prompt.
import { FAILURE_MESSAGES, REASONS, RunFailure, isTerminal, type CodingRun, type CodingRunSpecInput } from '../api/index.ts';
import { effectiveSpecInput } from '../reconcile/run-template.ts';
import { decodeDiff, isCutDiff, isKeptDiff, type DiffConfigMap } from '../reconcile/diff-config-map.ts';
import { isOwnedByRun, whyNotOwned } from '../reconcile/ownership.ts';
import { notUtf8DiffMessage } from '../reconcile/not-utf8-diff.ts';
import { cutAtLine } from '../reconcile/cut-at-line.ts';
import { untrustedElement } from '../agent/untrusted-element.ts';
import { ContinueFromReplacedError } from './errors/continue-from-replaced-error.ts';

/** What the prepare job read for the decision. */
export interface ContinuationInput {
  namespace: string;
  /** spec.continueFrom.name */
  sourceName: string;
  /** The follow-up's spec.repository.url. */
  repositoryUrl: string;
  /** The source run as read in `namespace`, undefined when there is none. */
  source: CodingRun | undefined;
  /** The ConfigMap named by the source's status.result.diffConfigMap, undefined when not found (or none named). */
  diffConfigMap: DiffConfigMap | undefined;
  /**
   * The follow-up's status.continuedFrom.uid: the source's uid when the follow-up was accepted.
   * Undefined for a run accepted before the operator pinned it, whose source is found by name alone.
   */
  acceptedUid?: string | undefined;
}

/** A refusal's failure is what the prepare job throws; its message is the failure's. */
export type Continuation =
  { ok: true; revision: string; diff: string; prompt: string } | { ok: false; failure: RunFailure; message: string };

const refused = (failure: RunFailure): Continuation => ({ ok: false, failure, message: failure.message });

/** Bounds of the source's task and final message in the first prompt. */
const TASK_IN_PROMPT = 4096;
const SUMMARY_IN_PROMPT = 8192;

const refuse = (message: string): Continuation => refused(new RunFailure(REASONS.InvalidSpec, message));

/** A source that named a template (spec.templateRef) worked on its effective spec, not on its own fields alone. */
function effectiveSpecOf(source: CodingRun): Partial<CodingRunSpecInput> {
  const effective = effectiveSpecInput(source);
  return effective.ok ? effective.spec : {};
}

export function decideContinuation(input: ContinuationInput): Continuation {
  const { source, sourceName, namespace } = input;
  const named = `spec.continueFrom names CodingRun ${sourceName}`;
  if (!source) return refuse(FAILURE_MESSAGES.continueFromMissing(sourceName, namespace));
  // Before anything of it is looked at: another run's state says nothing about the pinned one.
  if (input.acceptedUid !== undefined && source.metadata.uid !== input.acceptedUid) {
    const replaced = { sourceName, namespace, acceptedUid: input.acceptedUid, currentUid: source.metadata.uid };
    return refused(new ContinueFromReplacedError(replaced));
  }
  const status = source.status ?? {};
  if (!isTerminal(status.phase)) {
    return refuse(
      `${named}, which has not finished (phase ${status.phase ?? 'none yet'}); wait for it ` +
        `(kubectl wait --for=condition=Reconciling=False crun/${sourceName}) and create this run again.`,
    );
  }
  const sourceUrl = effectiveSpecOf(source).repository?.url;
  if (sourceUrl !== input.repositoryUrl) {
    return refuse(
      `${named}, which worked on ${sourceUrl ?? 'a repository it does not record'}; set spec.repository.url to that repository.`,
    );
  }
  const result = status.result;
  if (!result?.revision) {
    return refuse(
      `${named}, which records no cloned commit (status.result.revision): it ended before its clone, or before the operator ` +
        'recorded commits; create a run without continueFrom.',
    );
  }
  if (!result.diffConfigMap || result.diff === '') {
    return refuse(`${named}, which made no change to continue from; create a run without continueFrom.`);
  }
  const configMap = input.diffConfigMap;
  if (!configMap) {
    return refuse(`${named}, whose full diff (ConfigMap ${result.diffConfigMap}) is gone; create a run without continueFrom.`);
  }
  if (!isOwnedByRun(configMap, source)) {
    return refuse(
      `${named}, but ConfigMap ${result.diffConfigMap} is not its diff (${whyNotOwned(configMap, source)}); nothing was applied.`,
    );
  }
  const diff = decodeDiff(configMap);
  if (diff === undefined || diff === '') {
    return refuse(`${named}, but ConfigMap ${result.diffConfigMap} holds no diff; create a run without continueFrom.`);
  }
  if (!isKeptDiff(diff, result)) {
    return refuse(
      `${named}, but ConfigMap ${result.diffConfigMap} no longer holds the diff that run kept (its sha256 is not the source's ` +
        'status.result.diffSha256: someone changed it); nothing was applied. Create a run without continueFrom.',
    );
  }
  if (isCutDiff(diff, result)) {
    return refuse(
      `${named}, whose change is larger than the 1 MiB the operator keeps, so its full diff is not known; ` +
        'split the work into smaller runs, or create a run without continueFrom.',
    );
  }
  if (result.diffNotUtf8 === true) {
    return refuse(`${named}, but ${notUtf8DiffMessage('it cannot continue from that change exactly; nothing was applied')}.`);
  }
  return { ok: true, revision: result.revision, diff, prompt: continuationPrompt(source) };
}

/** The section of the first prompt that says where the run starts from. */
export function continuationPrompt(source: CodingRun): string {
  const status = source.status ?? {};
  const task = cutAtLine(effectiveSpecOf(source).task ?? '', TASK_IN_PROMPT);
  const summary = cutAtLine(status.result?.summary ?? '', SUMMARY_IN_PROMPT);
  const ending = `${status.phase ?? 'finished'}${status.reason ? ` (${status.reason})` : ''}`;
  return [
    `This run continues an earlier run, ${source.metadata.name}. Its changes are already in the workspace, uncommitted ` +
      '(`git diff HEAD` shows them); build on them rather than starting over.',
    `Its task was:\n${untrustedElement('earlier-task', `${task.text}${task.truncated ? '\n[cut]' : ''}`)}`,
    `It ended ${ending} with this final message:\n${untrustedElement('earlier-final-message', `${summary.text || '(none)'}${summary.truncated ? '\n[cut]' : ''}`)}`,
  ].join('\n\n');
}

/** The InvalidSpec message when `git apply` refuses the source's diff on its commit. */
export function diffDoesNotApply(sourceName: string, revision: string, gitOutput: string): string {
  return (
    `spec.continueFrom names CodingRun ${sourceName}, whose diff does not apply on its commit ${revision}: ` +
    `${gitOutput.trim().slice(0, 1000) || 'git apply failed'}; create a run without continueFrom.`
  );
}
