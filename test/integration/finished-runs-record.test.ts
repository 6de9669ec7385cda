// A run deleted after its ttlSecondsAfterFinished is first added to its namespace's record of
// finished runs (#15.2), the ConfigMap chamvi-finished-runs, which anyone who may create
// ConfigMaps there can make first. Made immutable, the record's write was refused (422) and the
// run retried at every backoff, forever; made of 170 000 keys, each try also held the event loop
// every namespace shares for 1.7 s to sort them. Now a refused record keeps the run, with a
// Warning Event, and tries again only every ten minutes; a ConfigMap far past the bound is not
// read. And the operator writes a record only for a run that did work: a run created with the
// cancel annotation ended Cancelled before it was validated, and its record, written by the
// operator for whoever created it, ended the same run applied later (by a GitOps tool) without
// running. On a real API server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createNamespace, kubectl, kubectlJson } from '../support/cluster.ts';
import { startControllerOnlyOperator } from '../support/controller-only-operator.ts';
import { eventsOf } from '../support/namespaced-runs.ts';
import { type OperatorProcess, eventually } from '../support/operator-process.ts';

const IMMUTABLE = 'finished-immutable';
const CROWDED = 'finished-crowded';
const CANCELLED = 'finished-cancelled';

/**
 * A run that is accepted and fails at once, and is deleted when it has: this operator makes no
 * NetworkPolicy and does not allow unisolated sandboxes, so an accepted run fails
 * IsolationNotEnforced before a sandbox is made. `annotations`: as its author wrote them.
 */
const acceptedRun = (namespace: string, annotations: Record<string, string> = {}, ttlSecondsAfterFinished = 0) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'gone-soon', namespace, annotations },
  spec: {
    task: 'Say hello',
    repository: { url: 'https://github.com/acme/app.git' },
    model: { provider: 'scripted', scriptRef: { name: 'script' } },
    ttlSecondsAfterFinished,
  },
});

const script = (namespace: string) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'script', namespace },
  data: { 'script.json': '{"turns":[{"text":"done"}]}' },
});

/** The run `gone-soon` in `namespace` once it has `phase`. */
const reached = (namespace: string, phase: string) =>
  eventually(
    async () => {
      const found = await kubectlJson<{ metadata: { uid: string }; status?: { phase?: string; reason?: string } }>([
        'get',
        'crun',
        'gone-soon',
        '-n',
        namespace,
      ]);
      return found.status?.phase === phase ? found : undefined;
    },
    30_000,
    `${namespace}/gone-soon to reach ${phase}`,
  );

/** The namespace's chamvi-finished-runs data, or undefined when there is none. */
async function finishedRunsData(namespace: string): Promise<Record<string, string> | undefined> {
  const found = await kubectl(['get', 'configmap', 'chamvi-finished-runs', '-n', namespace, '-o', 'json']);
  if (found.code !== 0) return undefined;
  return (JSON.parse(found.stdout) as { data?: Record<string, string> }).data ?? {};
}

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
  for (const namespace of [IMMUTABLE, CROWDED, CANCELLED]) await createNamespace(namespace, { restricted: true });
  await createNamespace(`${IMMUTABLE}-lease`);
  await create(
    finishedRuns(IMMUTABLE, { immutable: true, data: { other: '{}' } }),
    finishedRuns(CROWDED, { data: Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, ''])) }),
    ...[IMMUTABLE, CROWDED, CANCELLED].map(script),
  );
  operator = startControllerOnlyOperator({
    namespaces: [IMMUTABLE, CROWDED, CANCELLED],
    identity: 'op-finished',
    env: { CHAMVI_NETWORK_POLICY: 'false', CHAMVI_ALLOW_UNISOLATED_SANDBOXES: 'false' },
  });
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
      await create(acceptedRun(namespace));
      const run = await reached(namespace, 'Failed');
      expect(run.status?.reason).toBe('IsolationNotEnforced');
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

describe('a run that did no work', () => {
  it('created cancelled is deleted by its TTL without a record, and the same run applied again is validated and run', async () => {
    // What any author may create: ended Cancelled on its first reconcile, before validation.
    // A TTL of a few seconds, to see it Cancelled; the record's digest leaves the TTL out.
    await create(acceptedRun(CANCELLED, { 'chamvi.dev/cancel': 'blocking the GitOps run' }, 4));
    await reached(CANCELLED, 'Cancelled');
    await eventually(
      async () => ((await kubectl(['get', 'crun', 'gone-soon', '-n', CANCELLED])).code !== 0 ? true : undefined),
      30_000,
      'the cancelled run to be deleted by its TTL',
    );
    expect((await finishedRunsData(CANCELLED))?.['gone-soon']).toBeUndefined();

    // The same name and spec, as a GitOps tool applies it: not ended AlreadyFinished, but
    // validated and accepted (it then fails on this operator's isolation, as any run here).
    await create(acceptedRun(CANCELLED, {}, 4));
    const applied = await reached(CANCELLED, 'Failed');
    expect(applied.status?.reason).toBe('IsolationNotEnforced');
    // That one was accepted: its TTL deletion is recorded, as before.
    await eventually(async () => (await finishedRunsData(CANCELLED))?.['gone-soon'], 30_000, 'the accepted run to be recorded');
  }, 90_000);
});
