// Security #11.5 in decide(): an approval the agent refuses (its sha256 is not the input's)
// leaves the call pending, so spec.approval.timeout must still deny it at its time.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { APPROVAL_ANNOTATION, encodeApprovalAnnotation } from '../../operator/src/reconcile/approval-answer.ts';
import { decide } from '../../operator/src/reconcile/decide.ts';
import type { ObservedRun } from '../../operator/src/reconcile/observed-run.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'] }, {});
const now = new Date('2026-11-29T12:00:00Z');
const minutesAgo = (minutes: number) => new Date(now.getTime() - minutes * 60_000).toISOString();
const accepted = [
  { type: 'Accepted' as const, status: 'True' as const, reason: 'Valid', message: 'ok', lastTransitionTime: minutesAgo(90) },
];
const WRONG = 'a'.repeat(64);

function waitingRun(requestedMinutesAgo: number): CodingRun {
  return codingRunFixture({
    metadata: {
      creationTimestamp: minutesAgo(90),
      annotations: { [APPROVAL_ANNOTATION]: encodeApprovalAnnotation({ id: 's1-c1', decision: 'approve', sha256: WRONG }) },
    },
    spec: { approval: { tools: ['bash'], timeout: '30m' }, budget: { timeout: '4h' } },
    status: {
      phase: 'WaitingForApproval',
      startTime: minutesAgo(90),
      podName: 'fix-sandbox',
      conditions: accepted,
      pendingApproval: { id: 's1-c1', toolName: 'bash', input: '{}', requestedAt: minutesAgo(requestedMinutesAgo) },
    },
  });
}

const observe = (run: CodingRun): ObservedRun =>
  ({
    run,
    networkPolicyExists: true,
    pod: { name: 'fix-sandbox', phase: 'Running', ready: true, deleting: false },
    ownedConfigMaps: [],
    references: { secrets: {}, configMaps: { script: ['script.json'] } },
    admission: { active: 1, queuedAhead: 0 },
    agent: { state: 'waiting', moving: false },
  }) as unknown as ObservedRun;

const resumes = (run: CodingRun) =>
  decide(observe(run), config, now)
    .actions.filter((action) => action.type === 'resumeAgent')
    .map((action) => (action as { answer: object }).answer);

describe('security #11.5 decide: a refused approval does not stop the approval timeout', () => {
  it('passes the approval on (the agent checks its sha256) while the timeout has not passed', () => {
    expect(resumes(waitingRun(5))).toEqual([{ id: 's1-c1', decision: 'approve', sha256: WRONG }]);
  });

  it('denies the call at the timeout even though an approval for it is annotated, passing on that approval no more', () => {
    // Exactly one answer past the timeout: the refused approval and the deny raced for the call.
    expect(resumes(waitingRun(31))).toEqual([
      // timedOut: nobody answered in time (#15.5 records who answered, and this as no one).
      { id: 's1-c1', decision: 'deny', reason: 'no answer within spec.approval.timeout (30m)', timedOut: true },
    ]);
  });
});
