// Which runs an eval grades (controller/eval-reconciler.ts isAttemptRun, runsOfEval): the runs
// it made, as it made them. Whoever may create runs in the namespace can copy an attempt's
// labels and an owner reference naming the eval (its uid is on its runs' labels), and can take
// the attempt's name first; whoever may patch runs can change one. Such a run must not be graded.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { CREATOR_ANNOTATION } from '../../operator/src/reconcile/approval-answer.ts';
import { DELETING_RUN_WAIT_MS, isAttemptRun, isAttemptRunBeingDeleted, runsOfEval } from '../../operator/src/controller/eval-reconciler.ts';
import { parseEvalSpec } from '../../operator/src/evals/parse-eval.ts';
import { attemptRunFixture, codingEvalFixture } from '../support/coding-eval-fixture.ts';

const evaluation = codingEvalFixture();

const parsed = parseEvalSpec(evaluation);
if (!parsed.ok) throw new Error(parsed.problem);
const spec = parsed.spec;

/** The run as the API server returns the eval's create of it (JSON, a uid), with no generation: read as 1. */
const made = (): CodingRun => attemptRunFixture(evaluation, 1, { metadata: { uid: 'run-uid', generation: undefined } });

describe('isAttemptRun', () => {
  it('is true of the run the eval made for the attempt', () => {
    expect(isAttemptRun(made(), evaluation, spec)).toBe(true);
    expect(runsOfEval([made()], evaluation, spec)).toEqual([made()]);
  });

  it('is false of a copy under another name, or one another eval controls', () => {
    const renamed = made();
    renamed.metadata.name = 'easy-task';
    const otherOwner = made();
    (otherOwner.metadata as unknown as { ownerReferences: Array<{ uid: string }> }).ownerReferences[0]!.uid = 'other';
    expect(isAttemptRun(renamed, evaluation, spec)).toBe(false);
    expect(isAttemptRun(otherOwner, evaluation, spec)).toBe(false);
  });

  it("is false of a run under the attempt's name with a task, model or budget of its author's choosing", () => {
    const easier = made();
    easier.spec = { ...easier.spec, task: 'Print hello.' };
    const bigger = made();
    bigger.spec = { ...bigger.spec, budget: { maxSteps: 500 } };
    const otherModel = made();
    otherModel.spec = { ...otherModel.spec, model: { provider: 'scripted', scriptRef: { name: 'cheat' } } } as CodingRun['spec'];
    for (const run of [easier, bigger, otherModel]) expect(isAttemptRun(run, evaluation, spec)).toBe(false);
    // Changed and put back (the budget raised for the run's steps, then lowered before it
    // ended): the spec reads as the eval made it, the generation says it was changed.
    const restored = made();
    restored.metadata.generation = 3;
    expect(isAttemptRun(restored, evaluation, spec)).toBe(false);
    expect(isAttemptRun({ ...made(), metadata: { ...made().metadata, generation: 1 } }, evaluation, spec)).toBe(true);
  });

  it('is false of its run once it is being deleted (the API server raised its generation), which holds the name until gone', () => {
    const going = made();
    going.metadata = { ...going.metadata, generation: 2, deletionTimestamp: '2026-11-30T12:00:00Z', finalizers: ['chamvi.dev/finalizer'] };
    const now = new Date('2026-11-30T12:01:00Z');
    expect(isAttemptRun(going, evaluation, spec)).toBe(false);
    expect(isAttemptRunBeingDeleted(going, evaluation, spec, now)).toBe(true);
    expect(isAttemptRunBeingDeleted(made(), evaluation, spec, now)).toBe(false);
    const elsewhere = { ...going, metadata: { ...going.metadata, name: 'other-name' } };
    expect(isAttemptRunBeingDeleted(elsewhere, evaluation, spec, now)).toBe(false);
  });

  it("holds the name only for a run made as the eval makes it, and for at most DELETING_RUN_WAIT_MS (another's finalizer could hold it for good)", () => {
    const deleting = (run: CodingRun): CodingRun => ({
      ...run,
      metadata: { ...run.metadata, generation: 2, deletionTimestamp: '2026-11-30T12:00:00Z', finalizers: ['peer.example/hold'] },
    });
    const now = new Date('2026-11-30T12:01:00Z');
    // Someone else's run under the attempt's name, its labels copied: foreign before its deletion, and after.
    const byBob = made();
    byBob.metadata.annotations = { [CREATOR_ANNOTATION]: 'bob' };
    const otherOwner = made();
    (otherOwner.metadata as unknown as { ownerReferences: Array<{ uid: string }> }).ownerReferences[0]!.uid = 'other';
    const easier = made();
    easier.spec = { ...easier.spec, task: 'Print hello.' };
    for (const run of [byBob, otherOwner, easier]) expect(isAttemptRunBeingDeleted(deleting(run), evaluation, spec, now)).toBe(false);
    // The eval's own, held past the wait: no longer waited for.
    expect(
      isAttemptRunBeingDeleted(deleting(made()), evaluation, spec, new Date(Date.parse('2026-11-30T12:00:00Z') + DELETING_RUN_WAIT_MS - 1)),
    ).toBe(true);
    expect(
      isAttemptRunBeingDeleted(deleting(made()), evaluation, spec, new Date(Date.parse('2026-11-30T12:00:00Z') + DELETING_RUN_WAIT_MS)),
    ).toBe(false);
  });

  it('is false of a run another user created under the name, or one whose attempt labels were changed', () => {
    const byBob = made();
    byBob.metadata.annotations = { [CREATOR_ANNOTATION]: 'bob' };
    const relabelled = made();
    relabelled.metadata.labels = { ...relabelled.metadata.labels, 'chamvi.dev/eval-attempt': '2' };
    const beyond = made();
    beyond.metadata.labels = { ...beyond.metadata.labels, 'chamvi.dev/eval-attempt': '3' };
    for (const run of [byBob, relabelled, beyond]) expect(isAttemptRun(run, evaluation, spec)).toBe(false);
  });
});
