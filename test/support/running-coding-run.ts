// A CodingRun as the agent's jobs find it once prepared: Running, of the acme/webapp repository
// with a scripted model (ConfigMap 'script', key script.json), for the tests that run the agent
// jobs against an in-memory API server (MemoryKubeGateway). Each test names its budget and any
// other spec field it needs.
import type { CodingRun } from '../../operator/src/api/index.ts';

/** The run at `ref` (generation 1), task 'Say hi.', with `spec` over the base spec. */
export function runningCodingRun(ref: { uid: string; namespace: string; name: string }, spec: Partial<CodingRun['spec']> = {}): CodingRun {
  return {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { ...ref, generation: 1, resourceVersion: '1' },
    spec: {
      task: 'Say hi.',
      repository: { url: 'https://github.com/acme/webapp.git' },
      model: { provider: 'scripted', scriptRef: { name: 'script', key: 'script.json' } },
      ...spec,
    } as CodingRun['spec'],
    status: { phase: 'Running', startTime: new Date().toISOString(), message: 'The agent is working.' },
  };
}
