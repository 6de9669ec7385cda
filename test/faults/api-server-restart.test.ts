// Stop kube-apiserver for 20 s in the middle of runs, then start it again with the same
// flags. The operator must ride it out: the process keeps running (no crash, no exit on a
// lease it could not renew), its informers resume, every run completes as scripted, and
// nothing is made twice (one pod, one NetworkPolicy, one diff ConfigMap per run, counted by
// a watch that started before the runs).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restartApiServer } from '../support/fault-injection.ts';
import {
  GREETED,
  GREET_WORLD,
  type ObjectCensus,
  READ_README,
  type RunNamespace,
  approvalTurns,
  bashCall,
  codingRun,
  expectedTotals,
  operatorStory,
  scriptConfigMap,
  scriptedModel,
  usage,
  type ScriptTurn,
} from '../support/fault-fixture.ts';
import { FaultScene } from '../support/fault-scene.ts';
import { eventually, type OperatorProcess } from '../support/operator-process.ts';
import { SANDBOX_DENY_ALL_POLICY } from '../../operator/src/reconcile/sandbox-network-policy.ts';

const DOWN_MS = 20_000;
const RUNS = ['slow-0', 'slow-1', 'slow-2', 'slow-3'];

// Sleeps in the sandbox spread the runs' steps over the outage.
const SLOW_TURNS: ScriptTurn[] = [
  { toolCalls: [READ_README], usage: usage(10, 1) },
  { toolCalls: [bashCall('sleep 3')], usage: usage(20, 2) },
  { toolCalls: [GREET_WORLD], usage: usage(30, 3) },
  { toolCalls: [bashCall('sleep 3')], usage: usage(40, 4) },
  { toolCalls: [bashCall('sleep 3')], usage: usage(50, 5) },
  { text: 'Greeted the world.', usage: usage(60, 6) },
];
const APPROVAL_TURNS = approvalTurns(11);

let scene: FaultScene;
let ns: RunNamespace;
let census: ObjectCensus;
let operator: OperatorProcess;
let outage: { stoppedAt: number; readyAt: number };
let exitCode: number | null | undefined;

beforeAll(async () => {
  scene = await FaultScene.start({ namespace: 'faults-apiserver', census: true });
  ({ ns, census, operator } = scene);
  const { repoUrl } = scene;
  void operator.exited.then((code) => (exitCode = code));
  await ns.apply(scriptConfigMap('slow-script', SLOW_TURNS), scriptConfigMap('approval-script', APPROVAL_TURNS));
  await ns.apply(
    ...RUNS.map((name) => codingRun(name, repoUrl, scriptedModel('slow-script'))),
    codingRun('approval', repoUrl, scriptedModel('approval-script'), { approval: { tools: ['bash'] } }),
  );
  // Down while every run is under way.
  await Promise.all([
    ...RUNS.map((name) => ns.waitFor(name, 'to make its first step', (status) => (status.steps ?? 0) >= 1)),
    ns.waitFor('approval', 'to wait for approval', (status) => status.phase === 'WaitingForApproval'),
  ]);
  outage = await restartApiServer(DOWN_MS);
  console.info(
    `kube-apiserver was down ${outage.readyAt - outage.stoppedAt} ms; kube-controller-manager worked again ${Date.now() - outage.readyAt} ms later`,
  );
}, 300_000);

afterAll(async () => {
  await scene?.stop();
});

describe('kube-apiserver stopped for 20 s mid-run', () => {
  it('keeps the operator running and leading, with its caches synced again', async () => {
    expect(exitCode, operatorStory(operator)).toBeUndefined();
    // 20 s is past the renew deadline: the leader stood down, then led again.
    console.info(
      `leadership terms: ${operator.logged('became leader').length}, lost: ${operator.logged('lost the leader lease; reconciling stops until this replica leads again').length}`,
    );
    const port = (await operator.waitForLog('operator starting')).port as number;
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status, await ready.text()).toBe(200);
  });

  it('completes every run as scripted', async () => {
    const approval = await ns.status('approval');
    await ns.answer('approval', approval.pendingApproval!.id, 'approve');
    for (const [name, turns] of [...RUNS.map((run) => [run, SLOW_TURNS] as const), ['approval', APPROVAL_TURNS] as const]) {
      const status = await ns.finished(name, 180_000).catch((error: unknown) => {
        console.error(operatorStory(operator));
        throw error;
      });
      const totals = expectedTotals(turns);
      expect(status, `${name}: ${JSON.stringify(status)}\n${operatorStory(operator)}`).toMatchObject({
        phase: 'Succeeded',
        steps: totals.steps,
        toolCalls: totals.toolCalls,
      });
      expect(status.usage).toEqual(totals.usage);
      expect(status.result!.diff).toContain(GREETED);
      expect(await ns.diffConfigMap(name)).toBe(status.result!.diff);
    }
    expect(exitCode).toBeUndefined();
  });

  it("made one pod and one diff ConfigMap per run, and the namespace's sandbox deny-all once", async () => {
    expect(census.count('networkpolicies', SANDBOX_DENY_ALL_POLICY), 'deny-all policies').toBe(1);
    for (const name of [...RUNS, 'approval']) {
      const names = await ns.derivedNames(name);
      expect(census.count('pods', names.pod), `${name} pods`).toBe(1);
      // The census is a watch of its own, resumed after the outage like the operator's: the run
      // may have read its diff ConfigMap a moment before the census heard of it.
      await eventually(
        async () => (census.count('configmaps', names.diff) > 0 ? true : undefined),
        15_000,
        `the census to see ${name}'s diff ConfigMap`,
      );
      expect(census.count('configmaps', names.diff), `${name} diff ConfigMaps`).toBe(1);
    }
  });
});
