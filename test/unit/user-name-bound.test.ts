// One bound for a user name (reconcile/user-name.ts, api/coding-run-status.ts): the CRD stores a
// recorded writer's name up to USER_NAME_MAX code points, and the operator cuts the names it
// records to that many, so what it writes always fits what the API server accepts. And a name
// over the bound is quoted in its refusal by whole code points, as the cut counts them.
import { describe, expect, it } from 'vitest';
import { buildCodingRunCrd } from '../../operator/src/api/crd.ts';
import { APPROVAL_ANNOTATION, APPROVER_ANNOTATION, readApprovalAnnotation } from '../../operator/src/reconcile/approval-answer.ts';
import { separationOfDutiesRefusal } from '../../operator/src/reconcile/separation-of-duties.ts';
import { quotedUserName, USER_NAME_MAX, USER_NAME_QUOTED, userNameLength } from '../../operator/src/reconcile/user-name.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

type Schema = { properties?: Record<string, Schema>; items?: Schema; maxLength?: number };

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function statusSchema(): Schema {
  const crd = buildCodingRunCrd() as unknown as { spec: { versions: Array<{ schema: { openAPIV3Schema: Schema } }> } };
  return crd.spec.versions[0]!.schema.openAPIV3Schema.properties!.status!;
}

/** A run waiting for an approval that `approver` answered. */
function answeredBy(approver: string) {
  const run = codingRunFixture({
    metadata: {
      name: 'run',
      annotations: {
        'chamvi.dev/created-by': 'uma',
        [APPROVAL_ANNOTATION]: JSON.stringify({ id: 's1-c1', decision: 'approve', sha256: 'a'.repeat(64) }),
        [APPROVER_ANNOTATION]: approver,
      },
    },
    spec: { approval: { tools: ['bash'] } },
    status: { phase: 'WaitingForApproval' },
  });
  const reading = readApprovalAnnotation(run);
  if (reading.kind !== 'answer') throw new Error(`no answer on the run: ${reading.kind}`);
  return separationOfDutiesRefusal(run, reading.answer);
}

describe('the bound of a user name', () => {
  it('is the CRD bound of every writer the operator records', () => {
    const status = statusSchema();
    expect(status.properties!.template!.properties!.writtenBy!.maxLength).toBe(USER_NAME_MAX);
    expect(status.properties!.continuedFrom!.properties!.writtenBy!.items!.maxLength).toBe(USER_NAME_MAX);
  });

  it('quotes an over-long name by its first whole code points, and counts it in code points', () => {
    const name = `dana-${'😀'.repeat(600)}`;
    const refusal = answeredBy(name);
    const quoted = `dana-${'😀'.repeat(USER_NAME_QUOTED - 'dana-'.length)}`;
    expect(quotedUserName(name)).toBe(quoted);
    expect(refusal).toContain(`by "${quoted}...": separation of duties is on`);
    expect(refusal).toContain(`the name is ${userNameLength(name)} characters long, over the ${USER_NAME_MAX}`);
    expect(userNameLength(name)).toBe(605);
    expect(refusal).not.toMatch(LONE_SURROGATE);
  });

  it('quotes a short name whole', () => {
    expect(quotedUserName('😀'.repeat(USER_NAME_QUOTED))).toBe('😀'.repeat(USER_NAME_QUOTED));
    expect(quotedUserName('vera')).toBe('vera');
  });
});
