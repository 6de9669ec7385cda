// Other writers keep touching the runs while they progress, so the operator's status
// writes meet conflicts all the time: a loop that patches labels and annotations, and a
// status writer that keeps a condition of its own up to date (read, change, replace with
// the resourceVersion, as a well-behaved controller does). No update may be lost: every
// run ends with the script's steps, usage and diff, and the other writer's condition is
// still there. A terminal phase is never overwritten: once a run has Succeeded, writers
// holding an old copy of it, or writing blindly, cannot set it back to Running.
import { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeconfigPath } from '../support/cluster.ts';
import {
  GREETED,
  GREET_WORLD,
  READ_README,
  type RunNamespace,
  TERMINAL,
  bashCall,
  codingRun,
  expectedTotals,
  operatorStory,
  scriptConfigMap,
  scriptedModel,
  usage,
  type RunObject,
  type ScriptTurn,
} from '../support/fault-fixture.ts';
import { FaultScene } from '../support/fault-scene.ts';
import type { OperatorProcess } from '../support/operator-process.ts';

const RUNS = ['touched-0', 'touched-1', 'touched-2'];
const TOUCH_CONDITION = 'faults.chamvi.dev/Touched';

const TURNS: ScriptTurn[] = [
  { toolCalls: [READ_README], usage: usage(10, 1) },
  { toolCalls: [bashCall('sleep 1')], usage: usage(20, 2) },
  { toolCalls: [GREET_WORLD], usage: usage(30, 3) },
  { toolCalls: [bashCall('sleep 1')], usage: usage(40, 4) },
  { toolCalls: [READ_README], usage: usage(50, 5) },
  { toolCalls: [bashCall('sleep 1')], usage: usage(60, 6) },
  { toolCalls: [READ_README], usage: usage(70, 7) },
  { text: 'Greeted the world.', usage: usage(80, 8) },
];

type FullRun = RunObject & { apiVersion: string; kind: string; metadata: RunObject['metadata'] & { namespace: string }; spec: object };

let scene: FaultScene;
let ns: RunNamespace;
let operator: OperatorProcess;
let api: CustomObjectsApi;
const path = (name: string) => ({ group: 'chamvi.dev', version: 'v1alpha1', plural: 'codingruns', namespace: ns.name, name });
const codeOf = (error: unknown) => (error as { code?: number }).code;

/** The other writers, until stopped: what they managed and how often they met a conflict. */
const stats = { metadataPatches: 0, statusWrites: 0, statusConflicts: 0, errors: [] as string[] };
const lastTouch = new Map<string, string>();
let writing = true;
let writers: Promise<void>[] = [];
/** A copy of each run taken while it was Running: what a stale writer holds. */
const staleCopies = new Map<string, FullRun>();

async function touchMetadata(name: string, round: number): Promise<void> {
  const body = {
    metadata: {
      labels: { 'faults.chamvi.dev/round': String(round % 1000) },
      annotations: { 'faults.chamvi.dev/touched': new Date().toISOString() },
    },
  };
  await api.patchNamespacedCustomObject({ ...path(name), body }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
  stats.metadataPatches++;
}

async function touchStatus(name: string, round: number): Promise<void> {
  const run = (await api.getNamespacedCustomObject(path(name))) as FullRun;
  if (run.status?.phase === 'Running' && !staleCopies.has(name)) staleCopies.set(name, structuredClone(run));
  const message = `round ${round}`;
  const conditions = (run.status?.conditions ?? []).filter((condition) => condition.type !== TOUCH_CONDITION);
  conditions.push({
    type: TOUCH_CONDITION,
    status: 'True',
    reason: 'Touched',
    message,
    lastTransitionTime: new Date().toISOString(),
  } as never);
  try {
    await api.replaceNamespacedCustomObjectStatus({ ...path(name), body: { ...run, status: { ...run.status, conditions } } });
    stats.statusWrites++;
    lastTouch.set(name, message);
  } catch (error) {
    if (codeOf(error) !== 409) throw error;
    stats.statusConflicts++;
  }
}

async function keepWriting(name: string, write: (name: string, round: number) => Promise<void>): Promise<void> {
  for (let round = 0; writing; round++) {
    try {
      await write(name, round);
    } catch (error) {
      stats.errors.push(String(error).slice(0, 200));
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

beforeAll(async () => {
  scene = await FaultScene.start({ namespace: 'faults-conflicts' });
  ({ ns, operator } = scene);
  const { repoUrl } = scene;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  api = kubeConfig.makeApiClient(CustomObjectsApi);
  await ns.apply(scriptConfigMap('script', TURNS));
  await ns.apply(...RUNS.map((name) => codingRun(name, repoUrl, scriptedModel('script'))));
  // The runs exist; from now on someone else writes them all the time.
  writers = RUNS.flatMap((name) => [keepWriting(name, touchMetadata), keepWriting(name, touchStatus)]);
}, 120_000);

afterAll(async () => {
  writing = false;
  await Promise.all(writers);
  await scene?.stop();
});

describe('runs whose status and metadata others keep writing', () => {
  it("lose no update: steps, usage and diff as scripted, the other writer's condition kept", async () => {
    const totals = expectedTotals(TURNS);
    for (const name of RUNS) {
      const status = await ns.finished(name, 240_000).catch((error: unknown) => {
        console.error(operatorStory(operator));
        throw error;
      });
      expect(status, `${name}: ${JSON.stringify(status)}`).toMatchObject({
        phase: 'Succeeded',
        reason: 'Completed',
        steps: totals.steps,
        toolCalls: totals.toolCalls,
      });
      expect(status.usage).toEqual(totals.usage);
      expect(status.result!.diff).toContain(GREETED);
      expect(await ns.diffConfigMap(name)).toBe(status.result!.diff);
      expect(
        status.conditions!.map((condition) => condition.type),
        `${name}: ${JSON.stringify(status.conditions)}`,
      ).toEqual(expect.arrayContaining(['Accepted', 'Succeeded', 'Ready', 'SandboxReady']));
    }
    writing = false;
    await Promise.all(writers);
    console.info(`other writers: ${JSON.stringify({ ...stats, errors: stats.errors.length })}`);
    expect(stats.errors, stats.errors.slice(0, 5).join('\n')).toEqual([]);
    expect(stats.statusConflicts, 'the writers did collide').toBeGreaterThan(0);
    for (const name of RUNS) {
      const status = await ns.status(name);
      expect(
        status.conditions!.find((condition) => condition.type === TOUCH_CONDITION)?.message,
        `${name}: the other writer's last condition`,
      ).toBe(lastTouch.get(name));
    }
  });

  it('never lets a finished run go back to Running, whoever writes', async () => {
    for (const name of RUNS) {
      const stale = staleCopies.get(name)!;
      expect(stale.status?.phase).toBe('Running');
      // A writer with an old copy, as the operator's controller and workers write (resourceVersion).
      const replace = await api.replaceNamespacedCustomObjectStatus({ ...path(name), body: stale }).then(() => 200, codeOf);
      expect(replace, 'replace from a stale copy').toBe(409);
      // The workers' progress patch, which only applies to a Running run.
      const progress = await api
        .patchNamespacedCustomObjectStatus({
          ...path(name),
          body: [
            { op: 'test', path: '/status/phase', value: 'Running' },
            { op: 'add', path: '/status/steps', value: 1 },
          ],
        })
        .then(() => 200, codeOf);
      expect(progress, 'progress patch').toBe(422);
      // A writer that sends no resourceVersion at all: the CRD itself refuses the change.
      const blind = await api
        .patchNamespacedCustomObjectStatus(
          { ...path(name), body: { status: { phase: 'Running' } } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        )
        .then(() => 200, codeOf);
      expect(blind, 'merge patch without resourceVersion').toBe(422);
      const status = await ns.status(name);
      expect(TERMINAL.has(status.phase!)).toBe(true);
      expect(status).toMatchObject({ phase: 'Succeeded', steps: TURNS.length });
    }
  });
});
