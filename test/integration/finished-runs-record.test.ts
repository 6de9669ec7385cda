// A run deleted after its ttlSecondsAfterFinished is first added to its namespace's record of
// finished runs (#15.2), the ConfigMap chamvi-finished-runs, which anyone who may create
// ConfigMaps there can make first. Made immutable, the record's write was refused (422) and the
// run retried at every backoff, forever; made of 170 000 keys, each try also held the event loop
// every namespace shares for 1.7 s to sort them. Now a refused record keeps the run, with a
// Warning Event, and tries again only every ten minutes; a ConfigMap far past the bound is not
// read. On a real API server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createNamespace, kubectl, kubectlJson } from '../support/cluster.ts';
import { startControllerOnlyOperator } from '../support/controller-only-operator.ts';
import { eventsOf } from '../support/namespaced-runs.ts';
import { type OperatorProcess, eventually } from '../support/operator-process.ts';

const IMMUTABLE = 'finished-immutable';
const CROWDED = 'finished-crowded';

/** A run that fails at once (its repository is not allowed) and is deleted when it has. */
const deniedRun = (namespace: string) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'gone-soon', namespace },
  spec: {
    task: 'Say hello',
    repository: { url: 'https://github.com/other/app.git' },
    model: { provider: 'scripted', scriptRef: { name: 'script' } },
    ttlSecondsAfterFinished: 0,
  },
});

const finishedRuns = (namespace: string, extra: object) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'chamvi-finished-runs', namespace },
  ...extra,
});

async function create(...objects: object[]) {
  const result = await kubectl(['create', '-f', '-'], { input: objects.map((object) => stringify(object)).join('---\n') });
  if (result.code !== 0) throw new Error(result.stderr);
}

let operator: OperatorProcess;

beforeAll(async () => {
  for (const namespace of [IMMUTABLE, CROWDED]) await createNamespace(namespace, { restricted: true });
  await createNamespace(`${IMMUTABLE}-lease`);
  await create(
    finishedRuns(IMMUTABLE, { immutable: true, data: { other: '{}' } }),
    finishedRuns(CROWDED, { data: Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, ''])) }),
  );
  operator = startControllerOnlyOperator({ namespaces: [IMMUTABLE, CROWDED], identity: 'op-finished' });
  await operator.waitForLog('caches synced; reconciling');
}, 120_000);

afterAll(async () => {
  await operator?.kill();
});

describe('a record of finished runs the operator cannot write', () => {
  it.each([
    [IMMUTABLE, /record of finished runs could not take it \(.*immutable/i],
    [CROWDED, /holds 20000 entries, more than the 1000 the operator keeps there/],
  ])(
    'in %s keeps the run past its TTL with a Warning Event, and does not retry at every backoff',
    async (namespace, why) => {
      await create(deniedRun(namespace));
      const run = await eventually(
        async () => {
          const found = await kubectlJson<{ metadata: { uid: string }; status?: { phase?: string } }>([
            'get',
            'crun',
            'gone-soon',
            '-n',
            namespace,
          ]);
          return found.status?.phase === 'Failed' ? found : undefined;
        },
        30_000,
        `${namespace}/gone-soon to fail`,
      );
      const warning = await eventually(
        async () =>
          (await eventsOf(
            namespace,
            `involvedObject.uid=${run.metadata.uid},reason=FinishedRunNotRecorded`,
            'jsonpath={.items[*].message}',
          )) || undefined,
        30_000,
        'the FinishedRunNotRecorded Event',
      );
      expect(warning).toMatch(why);
      // Kept, and tried again in ten minutes, not at every backoff (one refusal, not a storm).
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      expect((await kubectl(['get', 'crun', 'gone-soon', '-n', namespace])).code).toBe(0);
      const refusals = operator.lines.filter(
        (line) => line.namespace === namespace && String(line.msg).startsWith('Not deleted after ttlSecondsAfterFinished'),
      );
      expect(refusals).toHaveLength(1);
    },
    90_000,
  );
});
