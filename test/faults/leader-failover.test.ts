// Three operator processes (#17.1: every replica runs step workers); SIGKILL the leader and
// one of the two standbys at once while runs are under way. The last one takes the lease
// within the lease time (plus its retry period and a margin), its workers take over both
// dead replicas' jobs, and every run finishes as scripted with one sandbox pod ever.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
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
import type { OperatorProcess } from '../support/operator-process.ts';

// The operator's defaults, read from its config schema rather than copied.
const { leaseDurationSeconds, retryPeriodSeconds } = loadOperatorConfig({}, {}).leaderElection;
const TAKEOVER_MARGIN_MS = 3_000;
const RUNS = ['busy-0', 'busy-1', 'busy-2'];

const BUSY_TURNS: ScriptTurn[] = [
  { toolCalls: [READ_README], usage: usage(10, 1) },
  { toolCalls: [bashCall('sleep 2')], usage: usage(20, 2) },
  { toolCalls: [GREET_WORLD], usage: usage(30, 3) },
  { toolCalls: [bashCall('sleep 2')], usage: usage(40, 4) },
  { toolCalls: [bashCall('sleep 2')], usage: usage(50, 5) },
  { toolCalls: [bashCall('sleep 2')], usage: usage(60, 6) },
  { text: 'Greeted the world.', usage: usage(70, 7) },
];
const APPROVAL_TURNS = approvalTurns(11);

let scene: FaultScene;
let ns: RunNamespace;
let repoUrl: string;
let census: ObjectCensus;
let leader: OperatorProcess;
let doomed: OperatorProcess;
let standby: OperatorProcess;
let takeoverMs = 0;

const operator = (identity: string) => scene.startOperator(identity);

beforeAll(async () => {
  scene = await FaultScene.start({ namespace: 'faults-failover', census: true, operator: false, env: { CHAMVI_JOB_LOCK_SECONDS: '4' } });
  ({ ns, repoUrl, census } = scene);
  await ns.apply(scriptConfigMap('busy-script', BUSY_TURNS), scriptConfigMap('approval-script', APPROVAL_TURNS));
  leader = operator('faults-failover-a');
  await leader.waitForLog('became leader', 60_000);
  doomed = operator('faults-failover-b');
  standby = operator('faults-failover-c');
  await doomed.waitForLog('standing by', 60_000);
  await standby.waitForLog('standing by', 60_000);

  await ns.apply(
    ...RUNS.map((name) => codingRun(name, repoUrl, scriptedModel('busy-script'))),
    codingRun('approval', repoUrl, scriptedModel('approval-script'), { approval: { tools: ['bash'] } }),
  );
  await Promise.all([
    ...RUNS.map((name) => ns.waitFor(name, 'to make its second step', (status) => (status.steps ?? 0) >= 2)),
    ns.waitFor('approval', 'to wait for approval', (status) => status.phase === 'WaitingForApproval'),
  ]);
  expect([...doomed.logged('became leader'), ...standby.logged('became leader')]).toEqual([]);
  const stepsBeforeKill = [leader, doomed, standby].map((process) => process.logged('step done').length);
  await Promise.all([leader.kill('SIGKILL'), doomed.kill('SIGKILL')]);
  const killedAt = Date.now();
  await standby.waitForLog('became leader', 60_000);
  takeoverMs = Date.now() - killedAt;
  console.info(
    `the last standby led ${takeoverMs} ms after the leader and the other standby were killed (lease ${leaseDurationSeconds} s, retry ${retryPeriodSeconds} s); ` +
      `steps done before the kill by replica: ${stepsBeforeKill.join(', ')}`,
  );
}, 300_000);

afterAll(async () => {
  await leader?.kill('SIGKILL');
  await doomed?.kill('SIGKILL');
  await scene?.stop();
});

describe('the leader and one of two standbys SIGKILLed mid-run', () => {
  it('hands the lease to the last standby within the lease time', () => {
    expect(takeoverMs).toBeLessThan((leaseDurationSeconds + retryPeriodSeconds) * 1000 + TAKEOVER_MARGIN_MS);
  });

  it('finishes every run as scripted on the one replica left, the approval answered to the new leader, with one pod each', async () => {
    const approval = await ns.status('approval');
    expect(
      approval,
      `${JSON.stringify(approval)}\n-- leader\n${operatorStory(leader)}\n-- killed standby\n${operatorStory(doomed)}\n-- standby\n${operatorStory(standby)}`,
    ).toMatchObject({ phase: 'WaitingForApproval' });
    await ns.answer('approval', approval.pendingApproval!.id, 'approve');
    for (const [name, turns] of [...RUNS.map((run) => [run, BUSY_TURNS] as const), ['approval', APPROVAL_TURNS] as const]) {
      const status = await ns.finished(name, 180_000).catch((error: unknown) => {
        console.error(`-- leader\n${operatorStory(leader)}\n-- standby\n${operatorStory(standby)}`);
        throw error;
      });
      const totals = expectedTotals(turns);
      expect(status, `${name}: ${JSON.stringify(status)}`).toMatchObject({
        phase: 'Succeeded',
        steps: totals.steps,
        toolCalls: totals.toolCalls,
      });
      expect(status.usage).toEqual(totals.usage);
      expect(status.result!.diff).toContain(GREETED);
      expect(census.count('pods', (await ns.derivedNames(name)).pod), `${name} pods`).toBe(1);
    }
  });

  it('runs a new run under the new leader', async () => {
    await ns.apply(codingRun('after', repoUrl, scriptedModel('approval-script'), {}));
    const status = await ns.finished('after', 120_000);
    expect(status).toMatchObject({ phase: 'Succeeded', steps: 3 });
    expect(standby.logged('status written').some((line) => line.name === 'after')).toBe(true);
  });
});
