// Which runs an eval grades (controller/eval-reconciler.ts runsOfEval): its own attempts only.
// Whoever may create runs in the namespace can copy an attempt's labels and an owner reference
// naming the eval (its uid is on its runs' labels); such a run must not be graded for a cell.
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { CodingEval } from '../../operator/src/api/coding-eval.ts';
import { runsOfEval } from '../../operator/src/controller/eval-reconciler.ts';
import { attemptLabels, attemptRunName, type PlannedAttempt } from '../../operator/src/evals/eval-matrix.ts';

const evaluation = { metadata: { name: 'bench', namespace: 'team', uid: 'eval-uid' } } as CodingEval;
const planned = { task: { name: 'fix' }, model: { name: 'm' }, attempt: 1 } as PlannedAttempt;
const owner = { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingEval', name: 'bench', uid: 'eval-uid', controller: true };

const runNamed = (name: string, ownerReferences = [owner]): CodingRun =>
  ({
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name, namespace: 'team', uid: `uid-${name}`, labels: attemptLabels(evaluation, planned), ownerReferences },
    spec: {},
  }) as unknown as CodingRun;

describe('runsOfEval', () => {
  it("keeps the eval's own attempt and leaves out a copy under another name, or one it does not control", () => {
    const own = runNamed(attemptRunName(evaluation, planned));
    const forged = runNamed('easy-task');
    const unowned = runNamed(attemptRunName(evaluation, planned), [{ ...owner, uid: 'other' }]);
    expect(runsOfEval([own, forged], evaluation)).toEqual([own]);
    expect(runsOfEval([unowned], evaluation)).toEqual([]);
  });
});
