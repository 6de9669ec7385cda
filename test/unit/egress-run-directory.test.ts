// The live runs the egress proxy serves (run-directory.ts), and what its watch's cache keeps of
// each: its identity and the verdict on whether and where it may connect (slimForEgress), so a
// run kept in the cluster, however large, costs the proxy a few hundred bytes.
import type { CustomObjectsApi, Watch } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { Informer } from '../../operator/src/controller/informer.ts';
import { RunDirectory, egressRunOf, egressRunSource, slimForEgress } from '../../operator/src/egress/run-directory.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const accepted = [
  { type: 'Accepted' as const, status: 'True' as const, reason: 'Valid', message: 'ok', lastTransitionTime: '2026-11-29T11:59:30Z' },
];
const ready = {
  type: 'Ready' as const,
  status: 'False' as const,
  reason: 'Running',
  message: 'x'.repeat(2_000),
  lastTransitionTime: '2026-11-29T12:00:00Z',
};
const templateSpec = {
  task: 'Update the dependencies',
  repository: { url: 'https://github.com/acme/webapp.git' },
  model: { provider: 'scripted', scriptRef: { name: 'script' } },
  sandbox: { egress: { allow: ['registry.npmjs.org'] } },
};

/** A run as the API server sends it: spec, a status the operator and the proxy filled, kubectl's annotation, managedFields. */
function heavy(overrides: Parameters<typeof codingRunFixture>[0] = {}): CodingRun {
  const run = codingRunFixture({
    spec: { sandbox: { egress: { allow: ['registry.npmjs.org', '*.pypi.org'] } }, ...overrides.spec },
    metadata: {
      resourceVersion: '7',
      labels: { team: 'web' },
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify({ spec: { task: 'x'.repeat(10_000) } }) },
      ...overrides.metadata,
    },
    status: {
      phase: 'Running',
      conditions: [...accepted, ready],
      egress: {
        connections: 500,
        refused: 3,
        hosts: Array.from({ length: 50 }, (_, i) => ({ host: `h${i}.test`, port: 443, connections: 10, refused: 0 })),
      },
      ...overrides.status,
    } as CodingRun['status'],
  });
  return run;
}

describe('slimForEgress', () => {
  it.each<[string, CodingRun, boolean]>([
    ['a live run with egress', heavy(), true],
    ['a finished run', heavy({ status: { phase: 'Succeeded' } as CodingRun['status'] }), false],
    ['a run being deleted', heavy({ metadata: { deletionTimestamp: '2026-11-29T12:01:00Z' } }), false],
    ['a run without egress', heavy({ spec: { sandbox: { egress: { allow: [] } } } }), false],
    ['a run whose spec the schema refuses', heavy({ spec: { task: '' } }), false],
    ['a run not started yet', heavy({ status: { phase: 'Pending' } as CodingRun['status'] }), true],
    [
      'a run of a template, accepted with the template recorded',
      (() => {
        const run = heavy({
          status: {
            phase: 'Running',
            template: { name: 'deps', uid: 't', resourceVersion: '4', spec: templateSpec },
          } as CodingRun['status'],
        });
        run.spec = { templateRef: { name: 'deps' } } as CodingRun['spec'];
        return run;
      })(),
      true,
    ],
    [
      'a run of a template not yet accepted',
      (() => {
        const run = heavy({ status: { phase: 'Pending', conditions: [] } as CodingRun['status'] });
        run.spec = { templateRef: { name: 'deps' } } as CodingRun['spec'];
        return run;
      })(),
      false,
    ],
  ])('gives the proxy the same verdict on %s as the whole object', (_what, run, served) => {
    expect(egressRunOf(run) !== undefined).toBe(served);
    expect(egressRunOf(slimForEgress(run))).toEqual(egressRunOf(run));
  });

  it('keeps of a run its name, namespace, uid and resourceVersion, and of its spec, status, labels and annotations nothing', () => {
    const run = heavy();
    (run.metadata as { managedFields?: unknown }).managedFields = [{ manager: 'kubectl' }];
    // Its string-keyed fields, as a copy through JSON has them (the verdict is under a symbol).
    expect(JSON.parse(JSON.stringify(slimForEgress(run)))).toEqual({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'fix', namespace: 'agents', uid: 'uid-1', resourceVersion: '7' },
      spec: {},
    });
  });

  it('does not take a verdict from the fields of a run read from JSON', () => {
    // A copy through JSON (as the API server sends it) loses what slimForEgress kept: its verdict
    // is worked out again, from an empty spec, and serves nothing.
    const copied = JSON.parse(JSON.stringify(slimForEgress(heavy()))) as CodingRun;
    expect(egressRunOf(copied)).toBeUndefined();
  });
});

describe('what slimForEgress keeps of the largest runs the API server takes (~1.4 MiB each)', () => {
  /** A run at the schema's bounds: task, instructions and 40 sandbox.env values of 32 KiB. */
  const largest = (allow: string[], status?: CodingRun['status']): CodingRun =>
    heavy({
      spec: {
        task: 't'.repeat(100_000),
        instructions: 'i'.repeat(100_000),
        sandbox: {
          env: Array.from({ length: 40 }, (_, index) => ({ name: `V${index}`, value: 'x'.repeat(32_768) })),
          egress: { allow },
        },
      },
      ...(status ? { status } : {}),
    });
  const KEPT_MAX = 8 * 1024;

  it.each<[string, CodingRun, boolean]>([
    ['a failed run', largest(['registry.npmjs.org'], { phase: 'Failed', reason: 'InvalidSpec' } as CodingRun['status']), false],
    ['a live run without egress', largest([]), false],
    ['a live run with egress', largest(['registry.npmjs.org', '*.pypi.org']), true],
  ])('keeps under 8 KiB of %s, and the same verdict', (_what, run, served) => {
    expect(JSON.stringify(run).length).toBeGreaterThan(1.3 * 1024 * 1024);
    const slim = slimForEgress(run);
    // The verdict counts too: it is what the copy holds for a run served.
    expect(JSON.stringify(slim).length + JSON.stringify(egressRunOf(slim) ?? null).length).toBeLessThan(KEPT_MAX);
    expect(egressRunOf(slim) !== undefined).toBe(served);
    expect(egressRunOf(slim)).toEqual(egressRunOf(run));
  });
});

describe("the egress proxy's watch of CodingRuns", () => {
  it('keeps each run slim in its cache, and serves it from the directory', async () => {
    const run = heavy();
    const custom = {
      listClusterCustomObject: async () => ({ items: [run], metadata: { resourceVersion: '7' } }),
    } as unknown as CustomObjectsApi;
    const watch = {
      watch: async (_path: string, _query: object, _onEvent: unknown, onDone: (error: unknown) => void) => {
        const controller = new AbortController();
        controller.signal.addEventListener('abort', () => onDone(undefined));
        return controller;
      },
    } as unknown as Watch;
    const directory = new RunDirectory();
    const informer = new Informer<CodingRun>(
      watch,
      egressRunSource(custom, undefined),
      { onChange: (object) => directory.onChange(object), onDelete: (object) => directory.onDelete(object) },
      { warn: () => undefined },
    );
    await informer.start();
    informer.stop();
    const cached = informer.get('agents', 'fix')!;
    expect(cached).toEqual(slimForEgress(run));
    expect(cached.status?.egress).toBeUndefined();
    expect(cached.metadata.annotations).toBeUndefined();
    expect(directory.lookup('uid-1')).toMatchObject({ namespace: 'agents', name: 'fix', uid: 'uid-1' });
    expect(directory.lookup('uid-1')?.allow).toHaveLength(2);
  });
});
