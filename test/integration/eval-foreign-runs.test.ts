// An eval grades only the runs it made, as it made them, on the real API server. A namespace
// peer who may create runs can read the eval's uid, derive an attempt's run name from it, and
// take that name before the eval does, with a task of their choosing, the attempt's labels and
// an owner reference naming the eval; one who may patch runs can raise an attempt's budget.
// Either run would have been graded for the attempt. The attempt now fails ForeignRun. And
// the run the eval did make, read back from the API server, is still its own (the spec it
// compares survives the round trip).
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { CodingEval } from '../../operator/src/api/coding-eval.ts';
import { EvalReconciler, isAttemptRun } from '../../operator/src/controller/eval-reconciler.ts';
import { attemptRun, plannedAttempts } from '../../operator/src/evals/eval-matrix.ts';
import { parseEvalSpec } from '../../operator/src/evals/parse-eval.ts';
import { createEvalGateway } from '../../operator/src/kube/eval-gateway.ts';
import { LIMITS } from '../../operator/src/api/index.ts';
import { buildDiffConfigMap, diffSha } from '../../operator/src/reconcile/diff-config-map.ts';
import { createNamespace, deleteNamespace, kubeconfigPath } from '../support/cluster.ts';
import { snapshotCache } from '../support/snapshot-cache.ts';

const namespace = `eval-foreign-${process.pid}`;
const group = { group: 'chamvi.dev', version: 'v1alpha1', namespace };
const logger = { info: () => {}, warn: () => {} };

let kubeConfig: KubeConfig;
let custom: CustomObjectsApi;
let core: CoreV1Api;

beforeAll(async () => {
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  custom = kubeConfig.makeApiClient(CustomObjectsApi);
  core = kubeConfig.makeApiClient(CoreV1Api);
  await createNamespace(namespace);
});

afterAll(async () => {
  await deleteNamespace(namespace);
});

/** Creates an eval of one task for the scripted model `m` (5 steps a run): it as stored, and its spec as the operator parses it. */
async function createEval(name: string, task: string, graders: object[], counts: { attempts: number; parallelism?: number }) {
  const evaluation = (await custom.createNamespacedCustomObject({
    ...group,
    plural: 'codingevals',
    body: {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingEval',
      metadata: { name },
      spec: {
        tasks: [{ name: 'fix', task, repository: { url: 'https://git.example.com/team/app.git' }, graders }],
        models: [{ name: 'm', model: { provider: 'scripted', scriptRef: { name: 'm' } } }],
        ...counts,
        budget: { maxSteps: 5 },
      },
    },
  })) as CodingEval;
  const parsed = parseEvalSpec(evaluation);
  if (!parsed.ok) throw new Error(parsed.problem);
  return { evaluation, spec: parsed.spec };
}

describe("an eval's attempt whose run name another run holds", () => {
  it('fails ForeignRun, whether the name was taken first or the run changed after, and is never graded on that run', async () => {
    const { evaluation, spec } = await createEval('hard', 'Fix the race in the scheduler.', [{ type: 'max-turns', max: 5 }], {
      attempts: 2,
      parallelism: 2,
    });
    const [first, second] = plannedAttempts(spec);

    // The peer takes attempt 1's name: the eval's labels, owner and creator, an easy task.
    const squat = attemptRun(evaluation, spec, first!);
    const taken = (await custom.createNamespacedCustomObject({
      ...group,
      plural: 'codingruns',
      body: { ...squat, spec: { ...squat.spec, task: 'Print hello.' } },
    })) as CodingRun;
    await custom.replaceNamespacedCustomObjectStatus({
      ...group,
      plural: 'codingruns',
      name: taken.metadata.name,
      body: { ...taken, status: { phase: 'Succeeded', reason: 'Completed', steps: 1 } },
    });

    const reconcile = reconcilerOf('hard');

    await reconcile();
    let status = (await readEval()).status!;
    expect(status.attempts).toHaveLength(1);
    expect(status.attempts![0]).toMatchObject({ attempt: 1, run: taken.metadata.name, passed: false, reason: 'ForeignRun' });
    expect(status.attempts![0]!.failedGraders![0]).toContain('not the one this eval made');
    const reasons = (await core.listNamespacedEvent({ namespace })).items.map((event) => event.reason);
    expect(reasons).toContain('ForeignRun');

    // Attempt 2's run is the eval's: read back from the API server, it is still its own.
    const made = (await custom.getNamespacedCustomObject({
      ...group,
      plural: 'codingruns',
      name: attemptRun(evaluation, spec, second!).metadata.name,
    })) as CodingRun;
    expect(isAttemptRun(made, await readEval(), spec)).toBe(true);
    await reconcile();
    expect((await readEval()).status!.attempts).toHaveLength(1);

    // A peer raises its budget for the run's steps and puts it back before it finishes: the
    // spec then reads as the eval made it, and the run is still not graded as the attempt.
    for (const budget of [{ maxSteps: 500 }, made.spec.budget])
      await custom.patchNamespacedCustomObject({
        ...group,
        plural: 'codingruns',
        name: made.metadata.name,
        body: [{ op: 'replace', path: '/spec/budget', value: budget }],
      });
    const raised = (await custom.getNamespacedCustomObject({ ...group, plural: 'codingruns', name: made.metadata.name })) as CodingRun;
    await custom.replaceNamespacedCustomObjectStatus({
      ...group,
      plural: 'codingruns',
      name: made.metadata.name,
      body: { ...raised, status: { phase: 'Succeeded', reason: 'Completed', steps: 1 } },
    });
    await reconcile();
    status = (await readEval()).status!;
    expect(status.attempts!.map((attempt) => [attempt.attempt, attempt.reason, attempt.passed])).toEqual([
      [1, 'ForeignRun', false],
      [2, 'ForeignRun', false],
    ]);
    expect(status.phase).toBe('Complete');
  });
});

describe("an eval's run deleted before it was graded", () => {
  it('is made again once gone, not failed ForeignRun while a finalizer holds it', async () => {
    const { evaluation, spec } = await createEval('deleted', 'Fix the test.', [{ type: 'max-turns', max: 5 }], { attempts: 1 });
    const reconcile = reconcilerOf('deleted');
    await reconcile();
    const name = attemptRun(evaluation, spec, plannedAttempts(spec)[0]!).metadata.name;
    const read = async () => (await custom.getNamespacedCustomObject({ ...group, plural: 'codingruns', name })) as CodingRun;
    const first = await read();
    // A finalizer holds the run as the operator's does while its pod and jobs go; the API
    // server raises the generation as it marks it for deletion.
    await custom.patchNamespacedCustomObject({
      ...group,
      plural: 'codingruns',
      name,
      body: [{ op: 'add', path: '/metadata/finalizers', value: ['chamvi.dev/test-hold'] }],
    });
    await custom.deleteNamespacedCustomObject({ ...group, plural: 'codingruns', name });
    const going = await read();
    expect(going.metadata.deletionTimestamp).toBeDefined();
    expect(going.metadata.generation).toBe(2);

    await reconcile();
    expect((await readEval('deleted')).status!.attempts).toEqual([]);
    const reasons = (await core.listNamespacedEvent({ namespace })).items
      .filter((event) => event.involvedObject.name === 'deleted')
      .map((event) => event.reason);
    expect(reasons).not.toContain('ForeignRun');

    await custom.patchNamespacedCustomObject({
      ...group,
      plural: 'codingruns',
      name,
      body: [{ op: 'remove', path: '/metadata/finalizers' }],
    });
    await reconcile();
    const again = await read();
    expect(again.metadata.uid).not.toBe(first.metadata.uid);
    expect(isAttemptRun(again, await readEval('deleted'), spec)).toBe(true);
  });
});

describe("an eval's attempt whose change is larger than the 1 MiB the operator keeps", () => {
  it('is not graded on the cut: a file changed past it does not pass file-unchanged', async () => {
    // The model pads the change with a file that sorts first, then edits what the grader
    // guards: the kept diff is cut inside the padding and never reaches package.json.
    const { evaluation, spec } = await createEval('padded', 'Fix the test.', [{ type: 'file-unchanged', path: 'package.json' }], {
      attempts: 1,
    });
    const reconcile = reconcilerOf('padded');
    await reconcile();
    const [attempt] = plannedAttempts(spec);
    const run = (await custom.getNamespacedCustomObject({
      ...group,
      plural: 'codingruns',
      name: attemptRun(evaluation, spec, attempt!).metadata.name,
    })) as CodingRun;

    const padding = `diff --git a/000-pad.txt b/000-pad.txt\nnew file mode 100644\n--- /dev/null\n+++ b/000-pad.txt\n@@ -0,0 +1,40000 @@\n${'+'.repeat(40).concat('\n').repeat(40_000)}`;
    const whole = `${padding}diff --git a/package.json b/package.json\n--- a/package.json\n+++ b/package.json\n@@ -1 +1 @@\n-{"scripts":{"test":"vitest"}}\n+{"scripts":{"test":"true"}}\n`;
    // What take-diff keeps: the first LIMITS.fullDiff bytes, in the run's own ConfigMap.
    const kept = Buffer.from(whole).subarray(0, LIMITS.fullDiff).toString('utf8');
    expect(kept).not.toContain('package.json');
    const configMap = buildDiffConfigMap(run as Parameters<typeof buildDiffConfigMap>[0], kept);
    await core.createNamespacedConfigMap({ namespace, body: configMap });
    await custom.replaceNamespacedCustomObjectStatus({
      ...group,
      plural: 'codingruns',
      name: run.metadata.name,
      body: {
        ...run,
        status: {
          phase: 'Succeeded',
          reason: 'Completed',
          steps: 1,
          result: {
            summary: 'Fixed.',
            diff: kept.slice(0, 1000),
            diffTruncated: true,
            diffConfigMap: configMap.metadata!.name,
            diffSha256: diffSha(kept),
            filesChanged: 2,
            insertions: 40_001,
            deletions: 1,
          },
        },
      },
    });
    await reconcile();
    const status = await readEval('padded');
    expect(status.status!.attempts![0]).toMatchObject({ attempt: 1, passed: false });
    expect(status.status!.attempts![0]!.failedGraders![0]).toContain('could not be read whole');
  });
});

async function readEval(name = 'hard'): Promise<CodingEval> {
  return (await custom.getNamespacedCustomObject({ ...group, plural: 'codingevals', name })) as CodingEval;
}

/** One reconcile of the eval `name`, from caches read fresh from the API server each time. */
function reconcilerOf(name: string): () => Promise<void> {
  const evals = snapshotCache(async () => ({ items: [await readEval(name)] }));
  const runs = snapshotCache(
    async () => (await custom.listNamespacedCustomObject({ ...group, plural: 'codingruns' })) as { items: CodingRun[] },
  );
  const reconciler = new EvalReconciler({ evals, runs, gateway: createEvalGateway(kubeConfig), identity: 'test', logger });
  return async () => {
    await Promise.all([evals.refresh(), runs.refresh()]);
    await reconciler.reconcile(`${namespace}/${name}`);
  };
}
