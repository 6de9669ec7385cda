// Separation of duties for a run that continues another (spec.continueFrom): the source's task
// and final message are the follow-up's first prompt and its diff the follow-up's workspace, so
// whoever wrote the source's task may not answer the follow-up's approvals, as a template's
// writer may not (reconcile/continue-from-pin.ts records them at acceptance,
// reconcile/separation-of-duties.ts refuses them).
import { describe, expect, it } from 'vitest';
import { CONTINUED_FROM_WRITERS_MAX, type CodingRun, type CodingRunSpec } from '../../operator/src/api/index.ts';
import { APPROVAL_ANNOTATION, type ApprovalAnswer } from '../../operator/src/reconcile/approval-answer.ts';
import { observeContinueFromSource, pinContinueFrom, writersOf, type RunLookup } from '../../operator/src/reconcile/continue-from-pin.ts';
import { separationOfDutiesRefusal } from '../../operator/src/reconcile/separation-of-duties.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

/** Vera's finished run `first`: its task is what the follow-up is told to go on from. */
const source = (more: Partial<CodingRun['metadata']> = {}, status: CodingRun['status'] = { phase: 'Succeeded' }) =>
  codingRunFixture({
    metadata: { name: 'first', uid: 'uid-first', ...more, annotations: { 'chamvi.dev/created-by': 'vera', ...more.annotations } },
    status,
  });
const cacheOf = (...held: CodingRun[]): RunLookup => ({
  get: (namespace, name) => held.find((each) => each.metadata.namespace === namespace && each.metadata.name === name),
});

/** Uma's follow-up of `first`, accepted with `continuedFrom`, waiting on its first gated call. */
const followUp = (continuedFrom: NonNullable<CodingRun['status']>['continuedFrom']) =>
  codingRunFixture({
    metadata: { name: 'second', annotations: { 'chamvi.dev/created-by': 'uma', [APPROVAL_ANNOTATION]: '{}' } },
    spec: { continueFrom: { name: 'first' }, approval: { tools: ['bash'] } },
    status: { phase: 'WaitingForApproval', ...(continuedFrom ? { continuedFrom } : {}) },
  });
const answer = (user: string): ApprovalAnswer => ({ id: 's1-c1', decision: 'approve', sha256: 'a'.repeat(64), user });

/** What acceptance records for `run` given the cache: observe, then pin, as the reconciler and decide() do. */
function accept(run: CodingRun, runs: RunLookup) {
  const pin = pinContinueFrom(run.metadata.namespace, run.spec as CodingRunSpec, observeContinueFromSource(run, runs).continueFromSource);
  if (!pin.ok) throw new Error(pin.refusal.message);
  return pin.pin;
}

describe("separation of duties: the writer of a continued run's source", () => {
  it("refuses the answer of the source's creator, once acceptance has recorded them", () => {
    const pinned = accept(followUp(undefined), cacheOf(source()));
    expect(pinned).toEqual({ name: 'first', uid: 'uid-first', writtenBy: ['vera'] });
    expect(separationOfDutiesRefusal(followUp(pinned), answer('vera'))).toBe(
      'Ignored the answer to approval s1-c1 by "vera": separation of duties is on, and "vera" wrote the task of CodingRun first ' +
        'this run continues from (spec.continueFrom), or of a run that one continued from; ask another approver',
    );
  });

  it('passes on the answer of someone who wrote none of it', () => {
    expect(separationOfDutiesRefusal(followUp(accept(followUp(undefined), cacheOf(source()))), answer('bob'))).toBeUndefined();
  });

  it('refuses the writer of a whole chain: the first run of it is still in the workspace and, through the summaries, in the prompt', () => {
    // ron wrote `zero`; vera continued it in `first`, which Uma's run continues.
    const zero = codingRunFixture({
      metadata: { name: 'zero', uid: 'uid-zero', annotations: { 'chamvi.dev/created-by': 'ron' } },
      status: { phase: 'Succeeded' },
    });
    const first = codingRunFixture({
      metadata: { name: 'first', uid: 'uid-first', annotations: { 'chamvi.dev/created-by': 'vera' } },
      spec: { continueFrom: { name: 'zero' } },
      status: { phase: 'Succeeded', continuedFrom: accept(codingRunFixture({ spec: { continueFrom: { name: 'zero' } } }), cacheOf(zero)) },
    });
    const pinned = accept(followUp(undefined), cacheOf(first, zero));
    expect(pinned?.writtenBy).toEqual(['vera', 'ron']);
    expect(separationOfDutiesRefusal(followUp(pinned), answer('ron'))).toMatch(/"ron" wrote the task of CodingRun first/);
  });

  it("names the source's template writer, as a scheduled run carries them or as the operator recorded them", () => {
    const scheduled = source({ annotations: { 'chamvi.dev/created-by': 'sam', 'chamvi.dev/template-written-by': 'tess' } });
    expect(writersOf(scheduled)).toEqual(['sam', 'tess']);
    const templated = source({}, { phase: 'Succeeded', template: { name: 'deps', writtenBy: 'tom', spec: {} } });
    expect(writersOf(templated)).toEqual(['vera', 'tom']);
  });

  it('names nobody for a source that names no creator (made with separation of duties off)', () => {
    const unnamed = codingRunFixture({ metadata: { name: 'first', uid: 'uid-first' }, status: { phase: 'Succeeded' } });
    expect(accept(followUp(undefined), cacheOf(unnamed))).toEqual({ name: 'first', uid: 'uid-first' });
  });

  it('refuses to accept a run whose chain names more writers than the status keeps: cutting the list would let one approve', () => {
    const many = Array.from({ length: CONTINUED_FROM_WRITERS_MAX }, (_, index) => `writer-${index}`);
    const long = source({}, { phase: 'Succeeded', continuedFrom: { name: 'zero', uid: 'uid-zero', writtenBy: many } });
    const observed = observeContinueFromSource(followUp(undefined), cacheOf(long)).continueFromSource;
    expect(observed?.writtenBy).toHaveLength(CONTINUED_FROM_WRITERS_MAX + 1);
    const pin = pinContinueFrom('agents', followUp(undefined).spec as CodingRunSpec, observed);
    expect(pin).toEqual({
      ok: false,
      refusal: { reason: 'InvalidSpec', message: expect.stringContaining(`more than the ${CONTINUED_FROM_WRITERS_MAX} a run records`) },
    });
  });
});
