// A CodingRun as the reconciler reads it from its cache, for the pure decision tests: a valid
// run of the acme/webapp repository, with the finalizer on, that each test bends by overrides.
import { FINALIZER, type CodingRun } from '../../operator/src/api/index.ts';

export interface CodingRunOverrides {
  spec?: Record<string, unknown>;
  status?: CodingRun['status'];
  metadata?: Partial<CodingRun['metadata']>;
}

export function codingRunFixture(overrides: CodingRunOverrides = {}): CodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: {
      name: 'fix',
      namespace: 'agents',
      uid: 'uid-1',
      generation: 1,
      finalizers: [FINALIZER],
      creationTimestamp: '2026-11-29T11:59:00Z',
      ...overrides.metadata,
    },
    spec: {
      task: 'Fix it',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
      ...overrides.spec,
    } as CodingRun['spec'],
    ...(overrides.status ? { status: overrides.status } : {}),
  };
}
