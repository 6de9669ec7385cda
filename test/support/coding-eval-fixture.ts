// A CodingEval as the eval reconciler reads it from its cache, for the eval controller's unit
// tests: one task (fix, graded by max-turns) × one scripted model, two attempts one at a time,
// written by alice, that each test bends by overrides; and the run it makes for an attempt, as
// the API server returns the create of it.
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { CodingEval, CodingEvalStatus } from '../../operator/src/api/coding-eval.ts';
import { attemptRun, plannedAttempts } from '../../operator/src/evals/eval-matrix.ts';
import { parseEvalSpec } from '../../operator/src/evals/parse-eval.ts';
import { CREATOR_ANNOTATION } from '../../operator/src/reconcile/approval-answer.ts';

export interface CodingEvalOverrides {
  spec?: Partial<CodingEval['spec']>;
  status?: CodingEvalStatus;
  metadata?: Partial<CodingEval['metadata']>;
}

export function codingEvalFixture(overrides: CodingEvalOverrides = {}): CodingEval {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingEval',
    metadata: {
      name: 'bench',
      namespace: 'team',
      uid: 'eval-uid',
      generation: 1,
      annotations: { [CREATOR_ANNOTATION]: 'alice' },
      ...overrides.metadata,
    },
    spec: {
      tasks: [
        { name: 'fix', task: 'Fix the bug.', repository: { url: 'https://example.com/r.git' }, graders: [{ type: 'max-turns', max: 5 }] },
      ],
      models: [{ name: 'm', model: { provider: 'scripted', scriptRef: { name: 'm' } } }],
      attempts: 2,
      parallelism: 1,
      budget: { maxSteps: 5 },
      ...overrides.spec,
    } as CodingEval['spec'],
    ...(overrides.status ? { status: overrides.status } : {}),
  };
}

export interface AttemptRunOverrides {
  metadata?: Partial<CodingRun['metadata']>;
  status?: CodingRun['status'];
}

/**
 * The run the eval makes for its attempt number `attempt` (from 1, in plannedAttempts order), as
 * the API server returns it: JSON, with a uid (`run-<attempt>`) and generation 1.
 */
export function attemptRunFixture(evaluation: CodingEval, attempt: number, overrides: AttemptRunOverrides = {}): CodingRun {
  const parsed = parseEvalSpec(evaluation);
  if (!parsed.ok) throw new Error(parsed.problem);
  const planned = plannedAttempts(parsed.spec)[attempt - 1];
  if (!planned) throw new Error(`the eval plans no attempt ${attempt}`);
  const manifest = JSON.parse(JSON.stringify(attemptRun(evaluation, parsed.spec, planned))) as CodingRun;
  return {
    ...manifest,
    metadata: { ...manifest.metadata, uid: `run-${attempt}`, generation: 1, ...overrides.metadata },
    ...(overrides.status ? { status: overrides.status } : {}),
  };
}
