// Separation of duties compares user names exactly: the writers the operator records of a run
// (status.template.writtenBy, status.continuedFrom.writtenBy) against the approver it reads
// (chamvi.dev/approver), and the chart's policy does the same. Names are cut to 512 code points,
// as the policy's size() and the CRD's maxLength count them: a cut in UTF-16 units split an
// emoji's surrogate pair, the API server stored the lone half as U+FFFD, and the writer, whose
// name no longer matched the record, could approve their own task.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { CodingRunTemplate } from '../../operator/src/api/coding-run-template.ts';
import { APPROVAL_ANNOTATION, APPROVER_ANNOTATION, readApprovalAnnotation } from '../../operator/src/reconcile/approval-answer.ts';
import { writersOf } from '../../operator/src/reconcile/continue-from-pin.ts';
import { withTemplate } from '../../operator/src/reconcile/run-template.ts';
import { separationOfDutiesRefusal } from '../../operator/src/reconcile/separation-of-duties.ts';
import { cutUserName, USER_NAME_MAX, userNameTooLong } from '../../operator/src/reconcile/user-name.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

/** 301 code points, 601 UTF-16 units: within the policy's 512, over JavaScript's. */
const EMOJI_WRITER = `u${'😀'.repeat(300)}`;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** What the API server stores of a string the operator writes: UTF-8, a lone surrogate as U+FFFD. */
const stored = (text: string) => Buffer.from(text, 'utf8').toString('utf8');
const codePoints = (text: string) => Array.from(text).length;

const approval = (user: string) => ({
  [APPROVAL_ANNOTATION]: JSON.stringify({ id: 's1-c1', decision: 'approve', sha256: 'a'.repeat(64) }),
  [APPROVER_ANNOTATION]: user,
});

/** A follow-up of `first`, accepted with `writtenBy` recorded, answered by `approver`. */
const followUp = (writtenBy: string[], approver: string) =>
  codingRunFixture({
    metadata: { name: 'second', annotations: { 'chamvi.dev/created-by': 'uma', ...approval(approver) } },
    spec: { continueFrom: { name: 'first' }, approval: { tools: ['bash'] } },
    status: { phase: 'WaitingForApproval', continuedFrom: { name: 'first', uid: 'uid-first', writtenBy } },
  });

/** The answer as decide() reads it off the run. */
function answerOn(run: CodingRun) {
  const reading = readApprovalAnnotation(run);
  if (reading.kind !== 'answer') throw new Error(`no answer on the run: ${reading.kind}`);
  return reading.answer;
}

describe('cutUserName: 512 code points, never half a pair', () => {
  it('keeps a name of up to 512 code points whole, however many UTF-16 units it takes', () => {
    expect(cutUserName(EMOJI_WRITER)).toBe(EMOJI_WRITER);
    const longest = '😀'.repeat(USER_NAME_MAX);
    expect(cutUserName(longest)).toBe(longest);
    expect(userNameTooLong(longest)).toBe(false);
  });

  it('cuts a longer name at a code point, leaving no lone surrogate', () => {
    for (const name of ['😀'.repeat(600), `u${'😀'.repeat(600)}`, 'x'.repeat(600)]) {
      const cut = cutUserName(name);
      expect(codePoints(cut)).toBe(USER_NAME_MAX);
      expect(name.startsWith(cut)).toBe(true);
      expect(cut).not.toMatch(LONE_SURROGATE);
      expect(stored(cut)).toBe(cut);
      expect(userNameTooLong(name)).toBe(true);
    }
  });
});

describe('the operator records a writer with an emoji name as the name the approver sends', () => {
  it("writersOf: the source's creator, stored by the API server, is the approver's name, and the writer is refused", () => {
    const source = codingRunFixture({
      metadata: { name: 'first', uid: 'uid-first', annotations: { 'chamvi.dev/created-by': EMOJI_WRITER } },
      status: { phase: 'Succeeded' },
    });
    const recorded = writersOf(source).map(stored);
    expect(recorded).toEqual([EMOJI_WRITER]);
    const run = followUp(recorded, EMOJI_WRITER);
    expect(answerOn(run).user).toBe(EMOJI_WRITER);
    expect(separationOfDutiesRefusal(run, answerOn(run))).toContain(`"${EMOJI_WRITER}" wrote the task of CodingRun first`);
  });

  it("withTemplate: the template's writer, stored by the API server, is refused", () => {
    const template: CodingRunTemplate = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRunTemplate',
      metadata: { name: 'deps', namespace: 'default', uid: 'tpl-uid', annotations: { 'chamvi.dev/created-by': EMOJI_WRITER } },
      spec: { task: 'Update the dependencies' } as CodingRunTemplate['spec'],
    };
    const run = codingRunFixture({
      metadata: { name: 'from-template', annotations: { 'chamvi.dev/created-by': 'uma', ...approval(EMOJI_WRITER) } },
      spec: { templateRef: { name: 'deps' } } as unknown as CodingRun['spec'],
    });
    const writtenBy = withTemplate(run, template).status?.template?.writtenBy;
    expect(writtenBy === undefined ? undefined : stored(writtenBy)).toBe(EMOJI_WRITER);
    const accepted = { ...run, status: { template: { name: 'deps', writtenBy: stored(writtenBy!), spec: {} } } } as CodingRun;
    expect(separationOfDutiesRefusal(accepted, answerOn(accepted))).toContain(`"${EMOJI_WRITER}" wrote the CodingRunTemplate`);
  });
});

describe('an approver whose name is over 512 code points is refused outright', () => {
  it('is refused though no record matches its name, cut or whole', () => {
    const long = `dana-${'😀'.repeat(600)}`;
    const run = followUp(['vera'], long);
    expect(separationOfDutiesRefusal(run, answerOn(run))).toMatch(/name is \d+ characters long, over the 512 the operator records/);
  });

  it('is refused when its cut matches a record, and says why rather than naming a writer', () => {
    const long = `dana-${'x'.repeat(600)}`;
    const run = followUp([cutUserName(long)], long);
    expect(separationOfDutiesRefusal(run, answerOn(run))).toContain('over the 512 the operator records');
  });

  it('a name of exactly 512 code points may answer when it wrote nothing', () => {
    const run = followUp(['vera'], '😀'.repeat(USER_NAME_MAX));
    expect(separationOfDutiesRefusal(run, answerOn(run))).toBeUndefined();
  });
});
