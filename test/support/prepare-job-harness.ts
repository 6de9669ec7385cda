// The prepare job with in-memory dependencies (recorders): what tests see is the job's
// decisions, up to the sandbox, which it asks for and gets none of. The clone is real git.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { CodingRun, CodingRunStatus } from '../../operator/src/api/index.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { recordedStatusWrite } from './recorded-status-write.ts';

/** A one-commit repository under dir. */
export function gitRepository(dir: string): string {
  const repo = join(dir, 'repo');
  execFileSync('git', ['init', '-q', repo]);
  execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '--allow-empty', '-m', 'x']);
  return repo;
}

/** A Running run of url in ns/r (uid-1), and the dependencies of its prepare job. */
export function prepareJobHarness(url: string, allowRepo: string[], options: { status?: CodingRunStatus } = {}) {
  const run: CodingRun = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingRun',
    metadata: { name: 'r', namespace: 'ns', uid: 'uid-1', generation: 1 },
    spec: {
      task: 'Fix it',
      repository: { url, credentialsSecretRef: { name: 'git', key: 'token' } },
      model: { provider: 'scripted', scriptRef: { name: 'script' } },
    },
    status: options.status ?? { phase: 'Running' },
  } as CodingRun;
  const seen = {
    statuses: [] as CodingRunStatus[],
    secretsRead: 0,
    sandboxes: 0,
    sandboxPods: [] as (string | undefined)[],
    freshReads: 0,
  };
  const deps = {
    states: { load: async () => undefined, delete: async () => undefined },
    // Answered as for a run found ended (nothing taken as written); the statuses computed are seen.
    status: { write: recordedStatusWrite(run, seen.statuses, 'terminal') },
    resources: {
      secretValue: async () => {
        seen.secretsRead++;
        return 'token';
      },
    },
    metrics: { execErrors: { inc() {} }, modelCallErrors: { inc() {} } },
    events: { record: async () => undefined },
    sandboxes: {
      for: (forRun: CodingRun) => {
        seen.sandboxes++;
        seen.sandboxPods.push(forRun.status?.podName);
        throw new Error('no sandbox in this test');
      },
      release: async () => undefined,
    },
    getRun: async () => run,
    getRunFresh: async () => {
      seen.freshReads++;
      return run;
    },
    clonePolicy: { allowRepo, maxCheckoutBytes: 1024 ** 3, maxCheckoutFiles: 1000 },
    logger: {
      info() {},
      warn() {},
      error() {},
      child() {
        return this;
      },
    },
    now: () => new Date('2026-11-30T00:00:00Z'),
  } as unknown as AgentDependencies;
  return { deps, seen, run };
}
