// CodingSchedules on the dev cluster's real API server, with the schedule controller's clock
// driven by the test (no waiting for real minutes): runs are created at their scheduled
// times under each concurrency policy, suspend and the history limits hold, a template is
// merged and its errors are reported, and a controller that dies between creating a run and
// writing the status, or is down over a scheduled time, neither doubles nor misses a run.
// The last test runs the real operator process and restarts it.
import { ApiException, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, kubeconfigPath, kubectl, kubectlOk } from '../support/cluster.ts';
import { applyIn, eventsOf } from '../support/namespaced-runs.ts';
import { createKubeGateway } from '../../operator/src/kube/kube-gateway.ts';
import { EventRecorder } from '../../operator/src/kube/event-recorder.ts';
import { createScheduleGateway, type ScheduleGateway } from '../../operator/src/kube/schedule-gateway.ts';
import { ScheduleReconciler } from '../../operator/src/controller/schedule-reconciler.ts';
import { TEMPLATE_RECHECK_MS } from '../../operator/src/reconcile/decide-schedule.ts';
import { OperatorProcess, eventually } from '../support/operator-process.ts';
import { redisUrl } from '../support/cluster.ts';

const NS = 'e2e-schedules';
const HOUR = 3600_000;

interface Run {
  metadata: {
    name: string;
    generateName?: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    ownerReferences?: Array<{ kind: string; name: string; uid: string; controller?: boolean }>;
    deletionTimestamp?: string;
  };
  spec: Record<string, any>;
  status?: { phase?: string };
}
interface Schedule {
  metadata: { uid: string };
  status?: {
    lastScheduleTime?: string;
    lastMissedTime?: string;
    nextScheduleTime?: string;
    active?: Array<{ name: string }>;
    activeCount?: number;
    conditions?: Array<{ type: string; status: string; reason: string; message: string }>;
  };
}

const logger = { info: () => {}, warn: () => {}, error: () => {} };
let kube: ScheduleGateway;
let events: EventRecorder;
/** The first whole hour at least a minute away: scheduled times the tests move the clock across. */
let base: number;

const RUN = {
  task: 'Update the dependencies',
  repository: { url: 'https://github.com/acme/app.git' },
  model: { provider: 'scripted', scriptRef: { name: 'script' } },
};

function reconcilerAt(clock: { now: number }, gateway: ScheduleGateway = kube) {
  return new ScheduleReconciler({ kube: gateway, events, logger, now: () => new Date(clock.now) });
}

async function createSchedule(name: string, spec: Record<string, unknown>): Promise<void> {
  await applyIn(NS, [
    { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingSchedule', metadata: { name }, spec: { schedule: '0 * * * *', ...spec } },
  ]);
}

async function runsOf(schedule: string): Promise<Run[]> {
  const out = await kubectlOk(['get', 'crun', '-n', NS, '-l', `chamvi.dev/schedule=${schedule}`, '-o', 'json']);
  return (JSON.parse(out) as { items: Run[] }).items.filter((run) => !run.metadata.deletionTimestamp);
}

const scheduledTimes = async (schedule: string) =>
  (await runsOf(schedule)).map((run) => Number(run.metadata.labels['chamvi.dev/scheduled-time']) * 1000).sort();

async function scheduleOf(name: string): Promise<Schedule> {
  return JSON.parse(await kubectlOk(['get', 'csched', name, '-n', NS, '-o', 'json'])) as Schedule;
}

async function finish(run: string, phase: 'Succeeded' | 'Failed', at: number): Promise<void> {
  await kubectlOk([
    'patch',
    'crun',
    run,
    '-n',
    NS,
    '--subresource=status',
    '--type=merge',
    '-p',
    JSON.stringify({ status: { phase, completionTime: new Date(at).toISOString() } }),
  ]);
}

beforeAll(async () => {
  await createNamespace(NS);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath());
  kube = createScheduleGateway(kubeConfig);
  events = new EventRecorder(createKubeGateway(kubeConfig), 'e2e-schedules', logger);
  // Just after the CRDs are applied the API server may answer 429 "storage is (re)initializing".
  await eventually(async () => ((await kube.listScheduleRuns(NS, 'none')) ? true : undefined), 60_000, 'the CodingRun storage');
  await eventually(
    async () => ((await kube.getSchedule(NS, 'none')) === undefined ? true : undefined),
    60_000,
    'the CodingSchedule storage',
  );
  // Last, after the waits above. Every schedule here is created, at the real time, within the
  // hour before base, so the clock's moves across base and base + HOUR are the only scheduled
  // times the tests meet. A schedule created in the last minute before a whole hour would find
  // that hour due once the clock stands at base - 60 s (a CI run at 12:59:29 had base an hour
  // later, and its first reconcile made the 13:00 run): wait for the hour to pass first.
  const untilHour = HOUR - (Date.now() % HOUR);
  if (untilHour < 60_000) await new Promise((resolve) => setTimeout(resolve, untilHour + 1_000));
  base = Math.ceil(Date.now() / HOUR) * HOUR;
});

afterAll(async () => {
  await deleteNamespace(NS);
});

describe('CodingSchedule', () => {
  it('refuses at kubectl apply what it can never run: no run spec and no template, a bad policy, a long name', async () => {
    const apply = (name: string, spec: object) =>
      kubectl(['apply', '-n', NS, '-f', '-'], {
        input: JSON.stringify({
          apiVersion: 'chamvi.dev/v1alpha1',
          kind: 'CodingSchedule',
          metadata: { name },
          spec: { schedule: '0 * * * *', ...spec },
        }),
      });
    expect((await apply('no-run', {})).stderr).toContain('without templateRef, runTemplate.spec must set task, repository and model');
    expect((await apply('bad-policy', { concurrencyPolicy: 'Sometimes', runTemplate: { spec: RUN } })).stderr).toContain(
      'Unsupported value',
    );
    expect((await apply('bad-cron', { schedule: 'every day', runTemplate: { spec: RUN } })).stderr).toMatch(
      /spec.schedule: Invalid value: "every day": spec.schedule in body should match/,
    );
    expect((await apply('x'.repeat(64), { runTemplate: { spec: RUN } })).stderr).toContain('at most 63 characters');
    // The operator wakes a moment after the time: a deadline of 0 skipped every run.
    expect((await apply('no-slack', { startingDeadlineSeconds: 0, runTemplate: { spec: RUN } })).stderr).toContain(
      'spec.startingDeadlineSeconds: Invalid value: 0: spec.startingDeadlineSeconds in body should be greater than or equal to 10',
    );
  });

  it('is described by kubectl explain, field by field', async () => {
    // The API server publishes a CRD's OpenAPI a moment after it is established.
    const explained = () =>
      eventually(
        async () => {
          const result = await kubectl(['explain', 'codingschedule.spec']);
          return result.stdout.includes('concurrencyPolicy') ? result.stdout : undefined;
        },
        30_000,
        'kubectl explain codingschedule.spec',
      );
    const spec = (await explained()).replace(/\s+/g, ' ');
    expect(spec).toContain('Replace cancels the active runs');
    expect(spec).toMatch(/startingDeadlineSeconds\s+<integer>/);
    expect((await kubectl(['explain', 'codingruntemplate.spec.budget'])).stdout).toContain('maxSteps');
  });

  it('says in status when the API server refuses its run, warns once, records nothing as scheduled and tries again', async () => {
    // A label value the API server refuses on a CodingRun (spaces): the run can never be created as it is.
    await createSchedule('refused', { runTemplate: { metadata: { labels: { team: 'ML Platform' } }, spec: RUN } });
    const clock = { now: base + 1_000 };
    const reconciler = reconcilerAt(clock);
    expect(await reconciler.reconcile(`${NS}/refused`)).toEqual({ requeueAfterMs: 60_000 });
    clock.now += 60_000;
    expect(await reconciler.reconcile(`${NS}/refused`)).toEqual({ requeueAfterMs: 60_000 });
    const schedule = await scheduleOf('refused');
    const ready = schedule.status?.conditions?.find((condition) => condition.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'RunRefused' });
    expect(ready?.message).toContain('metadata.labels');
    expect(schedule.status?.lastScheduleTime).toBeUndefined();
    expect(await runsOf('refused')).toEqual([]);
    const warnings = await kubectlOk([
      'get',
      'events',
      '-n',
      NS,
      '--field-selector',
      'involvedObject.name=refused,reason=RunRefused',
      '-o',
      'jsonpath={.items[*].count}',
    ]);
    expect(warnings.trim()).toBe('1');
  });

  it('says InvalidSchedule, within the condition the CRD takes, for a label key the API server stored but no run may carry', async () => {
    // The CRD cannot bound a map's keys: the API server stores this schedule. The message that
    // quoted the key whole (40 056 characters) was refused with the status (maxLength 32768), and
    // the schedule said nothing, reconciled again and again.
    const key = 'k'.repeat(40_000);
    await createSchedule('long-key', { runTemplate: { metadata: { labels: { [key]: 'x' } }, spec: RUN } });
    const clock = { now: base + 1_000 };
    expect(await reconcilerAt(clock).reconcile(`${NS}/long-key`)).toEqual({});
    const schedule = await scheduleOf('long-key');
    const ready = schedule.status?.conditions?.find((condition) => condition.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'InvalidSchedule' });
    expect(ready!.message.length).toBeLessThanOrEqual(32_768);
    expect(ready!.message).toMatch(/^spec\.runTemplate\.metadata\.labels\["k{20}/);
    expect(await runsOf('long-key')).toEqual([]);
    const warnings = await kubectlOk([
      'get',
      'events',
      '-n',
      NS,
      '--field-selector',
      'involvedObject.name=long-key,reason=InvalidSchedule',
      '-o',
      'jsonpath={.items[*].count}',
    ]);
    expect(warnings.trim()).toBe('1');
  });

  it('creates a run at its scheduled time: named after the schedule, owned by it, labelled with the time; kubectl get shows it', async () => {
    await createSchedule('hourly', { concurrencyPolicy: 'Allow', runTemplate: { metadata: { labels: { team: 'a' } }, spec: RUN } });
    const clock = { now: base - 60_000 };
    const reconciler = reconcilerAt(clock);
    expect(await reconciler.reconcile(`${NS}/hourly`)).toEqual({ requeueAfterMs: 60_000 });
    expect(await runsOf('hourly')).toEqual([]);

    clock.now = base + 2_000;
    await reconciler.reconcile(`${NS}/hourly`);
    const [run, ...more] = await runsOf('hourly');
    expect(more).toEqual([]);
    const schedule = await scheduleOf('hourly');
    // One name per time, as CronJob names its Jobs: the minutes since the epoch.
    expect(run!.metadata.name).toBe(`hourly-${base / 60_000}`);
    expect(run!.metadata.labels).toMatchObject({
      team: 'a',
      'chamvi.dev/schedule': 'hourly',
      'chamvi.dev/scheduled-time': String(base / 1000),
    });
    expect(run!.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'CodingSchedule', name: 'hourly', uid: schedule.metadata.uid, controller: true }),
    ]);
    // Stored as written, as a run written by hand is: the defaults are the operator schema's (#15.3).
    expect(run!.spec).toEqual(RUN);
    expect(schedule.status).toMatchObject({
      lastScheduleTime: new Date(base).toISOString().replace('.000Z', 'Z'),
      nextScheduleTime: new Date(base + HOUR).toISOString().replace('.000Z', 'Z'),
      active: [{ name: run!.metadata.name }],
      activeCount: 1,
    });
    const table = await kubectlOk(['get', 'csched', 'hourly', '-n', NS]);
    expect(table).toMatch(/NAME\s+SCHEDULE\s+SUSPEND\s+ACTIVE\s+LAST SCHEDULE\s+AGE/);
    expect(table).toMatch(/hourly\s+0 \* \* \* \*\s+false\s+1\s+/);
    expect(await eventsOf(NS, 'involvedObject.name=hourly,reason=RunCreated', 'jsonpath={.items[*].message}')).toContain(
      run!.metadata.name,
    );

    // Allow: the next time creates a second run beside the active one.
    clock.now = base + HOUR + 1_000;
    await reconciler.reconcile(`${NS}/hourly`);
    expect(await scheduledTimes('hourly')).toEqual([base, base + HOUR]);
    expect((await scheduleOf('hourly')).status?.activeCount).toBe(2);
    // Reconciling again at the same moment changes nothing, and sends no status write: the
    // status was compared as JSON, whose keys the API server sorts, so every reconcile sent
    // the same status again (a PUT the API server took as a no-op).
    let statusWrites = 0;
    const counting: ScheduleGateway = {
      ...kube,
      replaceScheduleStatus: (...args) => {
        statusWrites++;
        return kube.replaceScheduleStatus(...args);
      },
    };
    await reconcilerAt(clock, counting).reconcile(`${NS}/hourly`);
    expect(await scheduledTimes('hourly')).toEqual([base, base + HOUR]);
    expect(statusWrites).toBe(0);
  });

  it('Forbid: holds the next run while one is active and starts it late when that run ends', async () => {
    await createSchedule('forbid', { concurrencyPolicy: 'Forbid', runTemplate: { spec: RUN } });
    const clock = { now: base + 1_000 };
    const reconciler = reconcilerAt(clock);
    await reconciler.reconcile(`${NS}/forbid`);
    const [first] = await runsOf('forbid');
    clock.now = base + HOUR + 1_000;
    await reconciler.reconcile(`${NS}/forbid`);
    expect(await scheduledTimes('forbid')).toEqual([base]);
    await finish(first!.metadata.name, 'Succeeded', base + HOUR + 5_000);
    clock.now = base + HOUR + 6_000;
    await reconciler.reconcile(`${NS}/forbid`);
    expect(await scheduledTimes('forbid')).toEqual([base, base + HOUR]);
    expect((await scheduleOf('forbid')).status).toMatchObject({ activeCount: 1 });
  });

  it('Replace: deletes the active run and creates the new one', async () => {
    await createSchedule('replace', { concurrencyPolicy: 'Replace', runTemplate: { spec: RUN } });
    const clock = { now: base + 1_000 };
    const reconciler = reconcilerAt(clock);
    await reconciler.reconcile(`${NS}/replace`);
    const [first] = await runsOf('replace');
    clock.now = base + HOUR + 1_000;
    await reconciler.reconcile(`${NS}/replace`);
    const runs = await runsOf('replace');
    expect(runs.map((run) => run.metadata.name)).not.toContain(first!.metadata.name);
    expect(await scheduledTimes('replace')).toEqual([base + HOUR]);
    expect(await eventsOf(NS, 'involvedObject.name=replace,reason=RunReplaced', 'jsonpath={.items[*].message}')).toContain(
      first!.metadata.name,
    );
  });

  it('suspend: creates nothing while suspended, and skips what it missed past startingDeadlineSeconds', async () => {
    await createSchedule('paused', { suspend: true, startingDeadlineSeconds: 600, runTemplate: { spec: RUN } });
    const clock = { now: base + 1_000 };
    const reconciler = reconcilerAt(clock);
    await reconciler.reconcile(`${NS}/paused`);
    expect(await runsOf('paused')).toEqual([]);
    expect((await scheduleOf('paused')).status?.nextScheduleTime).toBeUndefined();
    expect(await kubectlOk(['get', 'csched', 'paused', '-n', NS, '-o', 'jsonpath={.status.conditions[0].reason}'])).toBe('Suspended');
    await kubectlOk(['patch', 'csched', 'paused', '-n', NS, '--type=merge', '-p', '{"spec":{"suspend":false}}']);
    clock.now = base + 20 * 60_000;
    await reconciler.reconcile(`${NS}/paused`);
    expect(await runsOf('paused')).toEqual([]);
    expect((await scheduleOf('paused')).status?.lastMissedTime).toBe(new Date(base).toISOString().replace('.000Z', 'Z'));
    expect(await eventsOf(NS, 'involvedObject.name=paused,reason=MissedSchedule', 'jsonpath={.items[*].type}')).toBe('Warning');
    clock.now = base + HOUR + 1_000;
    await reconciler.reconcile(`${NS}/paused`);
    expect(await scheduledTimes('paused')).toEqual([base + HOUR]);
  });

  it('deletes the finished runs past its history limit before a try a quota refuses, so the quota frees up by itself', async () => {
    // Two CodingRuns at most, a history of one: the third run fits only once the oldest
    // finished run is gone. The deletions came after the create, which the quota refused, so
    // they never came and the schedule stayed refused for good. The quota is the one a
    // ResourceQuota on count/codingruns.chamvi.dev makes, answered as the API server does (403)
    // in front of the real one: this control plane's quota controller had not counted the CRD
    // after two minutes.
    await createSchedule('quota', { successfulRunsHistoryLimit: 1, runTemplate: { spec: RUN } });
    const quota: ScheduleGateway = {
      ...kube,
      async createRun(run) {
        const there = (await runsOf('quota')).length;
        if (there >= 2) {
          const refusal = {
            message: `codingruns.chamvi.dev is forbidden: exceeded quota: runs, used: count/codingruns.chamvi.dev=${there}, limited: count/codingruns.chamvi.dev=2`,
          };
          throw new ApiException(403, 'Forbidden', JSON.stringify(refusal), {});
        }
        return kube.createRun(run);
      },
    };
    const clock = { now: base };
    const reconciler = reconcilerAt(clock, quota);
    for (const hour of [0, 1]) {
      clock.now = base + hour * HOUR + 1_000;
      await reconciler.reconcile(`${NS}/quota`);
      const made = (await runsOf('quota')).find(
        (run) => run.metadata.labels['chamvi.dev/scheduled-time'] === String((base + hour * HOUR) / 1000),
      );
      await finish(made!.metadata.name, 'Succeeded', clock.now + 1_000);
    }
    clock.now = base + 2 * HOUR + 1_000;
    await reconciler.reconcile(`${NS}/quota`);
    expect(await scheduledTimes('quota')).toEqual([base + HOUR, base + 2 * HOUR]);
    expect((await scheduleOf('quota')).status?.conditions?.find((condition) => condition.type === 'Ready')).toMatchObject({
      status: 'True',
    });
  });

  it('keeps successfulRunsHistoryLimit and failedRunsHistoryLimit finished runs, the newest', async () => {
    await createSchedule('history', {
      concurrencyPolicy: 'Allow',
      successfulRunsHistoryLimit: 1,
      failedRunsHistoryLimit: 1,
      runTemplate: { spec: RUN },
    });
    const clock = { now: base };
    const reconciler = reconcilerAt(clock);
    const outcomes: Array<'Succeeded' | 'Failed'> = ['Succeeded', 'Failed', 'Succeeded', 'Failed'];
    for (const [hour, outcome] of outcomes.entries()) {
      clock.now = base + hour * HOUR + 1_000;
      await reconciler.reconcile(`${NS}/history`);
      const run = (await runsOf('history')).find(
        (candidate) => candidate.metadata.labels['chamvi.dev/scheduled-time'] === String((base + hour * HOUR) / 1000),
      );
      await finish(run!.metadata.name, outcome, clock.now + 1_000);
    }
    clock.now = base + 3 * HOUR + 10_000;
    await reconciler.reconcile(`${NS}/history`);
    const left = await runsOf('history');
    expect(left.map((run) => [Number(run.metadata.labels['chamvi.dev/scheduled-time']) * 1000, run.status?.phase]).sort()).toEqual([
      [base + 2 * HOUR, 'Succeeded'],
      [base + 3 * HOUR, 'Failed'],
    ]);
  });

  it('lays the schedule over a CodingRunTemplate, and says so when the template is missing or the merge is invalid', async () => {
    await applyIn(NS, [
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRunTemplate',
        metadata: { name: 'deps' },
        spec: { repository: RUN.repository, model: RUN.model, budget: { maxSteps: 12 } },
      },
    ]);
    await createSchedule('templated', {
      templateRef: { name: 'deps' },
      runTemplate: { spec: { task: 'Bump lodash', budget: { timeout: '5m' } } },
    });
    await createSchedule('orphan', { templateRef: { name: 'missing' }, runTemplate: { spec: { task: 'x' } } });
    await createSchedule('broken', { templateRef: { name: 'deps' } });
    const clock = { now: base + 1_000 };
    const reconciler = reconcilerAt(clock);
    await reconciler.reconcile(`${NS}/templated`);
    const [run] = await runsOf('templated');
    expect(run!.spec).toMatchObject({
      task: 'Bump lodash',
      repository: RUN.repository,
      model: RUN.model,
      budget: { maxSteps: 12, timeout: '5m' },
    });

    // Nothing watches templates: each comes back by itself to look again.
    expect(await reconciler.reconcile(`${NS}/orphan`)).toEqual({ requeueAfterMs: TEMPLATE_RECHECK_MS });
    expect(await reconciler.reconcile(`${NS}/broken`)).toEqual({ requeueAfterMs: TEMPLATE_RECHECK_MS });
    expect(await runsOf('orphan')).toEqual([]);
    expect(await runsOf('broken')).toEqual([]);
    const ready = async (name: string) => (await scheduleOf(name)).status?.conditions?.find((condition) => condition.type === 'Ready');
    expect(await ready('orphan')).toMatchObject({ status: 'False', reason: 'TemplateNotFound' });
    expect(await ready('broken')).toMatchObject({
      status: 'False',
      reason: 'InvalidRunSpec',
      message: expect.stringContaining('spec.task') as string,
    });
    expect(await eventsOf(NS, 'involvedObject.name=orphan,reason=TemplateNotFound', 'jsonpath={.items[*].type}')).toBe('Warning');

    // Once the template exists, the time still due runs (no startingDeadlineSeconds).
    await applyIn(NS, [
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRunTemplate',
        metadata: { name: 'missing' },
        spec: { repository: RUN.repository, model: RUN.model },
      },
    ]);
    clock.now = base + 60_000;
    await reconciler.reconcile(`${NS}/orphan`);
    expect(await scheduledTimes('orphan')).toEqual([base]);
    expect(await ready('orphan')).toMatchObject({ status: 'True' });
  });

  it('a controller that dies between creating the run and writing the status does not double it on restart', async () => {
    await createSchedule('crash', { concurrencyPolicy: 'Allow', runTemplate: { spec: RUN } });
    const clock = { now: base + 1_000 };
    const dying: ScheduleGateway = {
      ...kube,
      replaceScheduleStatus: () => Promise.reject(new Error('operator killed before the status write')),
    };
    await expect(reconcilerAt(clock, dying).reconcile(`${NS}/crash`)).rejects.toThrow('killed');
    expect(await scheduledTimes('crash')).toEqual([base]);
    expect((await scheduleOf('crash')).status?.lastScheduleTime).toBeUndefined();

    // A new controller (nothing kept in memory) at the same moment, and a little later.
    clock.now = base + 3_000;
    await reconcilerAt(clock).reconcile(`${NS}/crash`);
    await reconcilerAt(clock).reconcile(`${NS}/crash`);
    expect(await scheduledTimes('crash')).toEqual([base]);
    expect((await scheduleOf('crash')).status).toMatchObject({
      lastScheduleTime: new Date(base).toISOString().replace('.000Z', 'Z'),
      activeCount: 1,
    });
  });

  // The create's answer lost on the way back (a dropped connection) and the create sent again:
  // with generated names the second made a second run for the same time.
  it('a create sent again after its answer was lost makes no second run, and the run is recorded as made', async () => {
    await createSchedule('lost-answer', { concurrencyPolicy: 'Forbid', runTemplate: { spec: RUN } });
    const resent: ScheduleGateway = {
      ...kube,
      async createRun(run) {
        await kube.createRun(run);
        return kube.createRun(run);
      },
    };
    const clock = { now: base + 1_000 };
    await reconcilerAt(clock, resent).reconcile(`${NS}/lost-answer`);
    const runs = await runsOf('lost-answer');
    expect(runs.map((run) => run.metadata.name)).toEqual([`lost-answer-${base / 60_000}`]);
    expect((await scheduleOf('lost-answer')).status).toMatchObject({
      lastScheduleTime: new Date(base).toISOString().replace('.000Z', 'Z'),
      active: [{ name: `lost-answer-${base / 60_000}` }],
      activeCount: 1,
    });
    expect(await eventsOf(NS, 'involvedObject.name=lost-answer,reason=ForeignRun', 'jsonpath={.items[*].message}')).toBe('');
  });

  // The status write after the create lost (a 409: spec.runTemplate was edited meanwhile), the
  // schedule edited: its run no longer matches what it makes, and was counted as foreign, so
  // Forbid started the next time beside it.
  it('Forbid: its run made before an edit whose status write was lost holds the next time', async () => {
    await createSchedule('edited', { concurrencyPolicy: 'Forbid', runTemplate: { spec: RUN } });
    const clock = { now: base + 1_000 };
    const conflicted: ScheduleGateway = {
      ...kube,
      replaceScheduleStatus: () => Promise.reject(new ApiException(409, 'Conflict', JSON.stringify({ reason: 'Conflict' }), {})),
    };
    await expect(reconcilerAt(clock, conflicted).reconcile(`${NS}/edited`)).rejects.toThrow();
    const patch = { spec: { runTemplate: { spec: { ...RUN, task: 'Update the dependencies and the lockfile' } } } };
    await kubectlOk(['patch', 'csched', 'edited', '-n', NS, '--type=merge', '-p', JSON.stringify(patch)]);
    clock.now = base + 3_000;
    await reconcilerAt(clock).reconcile(`${NS}/edited`);
    // Recorded as the schedule's own run for its time, not a foreign one.
    expect((await scheduleOf('edited')).status).toMatchObject({ activeCount: 1 });
    expect((await scheduleOf('edited')).status?.active?.map((active) => active.name)).toEqual(
      (await runsOf('edited')).map((run) => run.metadata.name),
    );
    clock.now = base + HOUR + 1_000;
    await reconcilerAt(clock).reconcile(`${NS}/edited`);
    expect(await scheduledTimes('edited')).toEqual([base]);
    expect(await eventsOf(NS, 'involvedObject.name=edited,reason=ForeignRun', 'jsonpath={.items[*].message}')).toBe('');
  });

  it('a run made under its name for a time by someone else takes that time, is reported ForeignRun and never adopted', async () => {
    await createSchedule('squatted', { concurrencyPolicy: 'Forbid', runTemplate: { spec: RUN } });
    const name = `squatted-${base / 60_000}`;
    await applyIn(NS, [
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRun',
        metadata: { name, labels: { 'chamvi.dev/schedule': 'squatted', 'chamvi.dev/scheduled-time': String(base / 1000) } },
        spec: { ...RUN, task: 'Something else' },
      },
    ]);
    const clock = { now: base + 1_000 };
    await reconcilerAt(clock).reconcile(`${NS}/squatted`);
    const [held, ...more] = await runsOf('squatted');
    expect(more).toEqual([]);
    expect(held!.spec.task).toBe('Something else');
    expect(held!.metadata.ownerReferences ?? []).toEqual([]);
    expect((await scheduleOf('squatted')).status).toMatchObject({
      lastScheduleTime: new Date(base).toISOString().replace('.000Z', 'Z'),
      active: [],
      activeCount: 0,
    });
    expect(await eventsOf(NS, 'involvedObject.name=squatted,reason=ForeignRun', 'jsonpath={.items[*].message}')).toContain(name);
    // Not the schedule's: it holds no later time under Forbid.
    clock.now = base + HOUR + 1_000;
    await reconcilerAt(clock).reconcile(`${NS}/squatted`);
    expect((await runsOf('squatted')).map((run) => run.metadata.name).sort()).toEqual([name, `squatted-${(base + HOUR) / 60_000}`].sort());
  });

  it('a controller down over a scheduled time creates that run once when it is back', async () => {
    await createSchedule('downtime', { concurrencyPolicy: 'Allow', startingDeadlineSeconds: 3600, runTemplate: { spec: RUN } });
    const clock = { now: base + 1_000 };
    await reconcilerAt(clock).reconcile(`${NS}/downtime`);
    // Down from base+1s until base+1h+25m: the base+1h run is 25 minutes late, within the deadline.
    clock.now = base + HOUR + 25 * 60_000;
    const back = reconcilerAt(clock);
    await back.reconcile(`${NS}/downtime`);
    await back.reconcile(`${NS}/downtime`);
    expect(await scheduledTimes('downtime')).toEqual([base, base + HOUR]);
  });
});

describe('CodingSchedule with the real operator process', () => {
  let operator: OperatorProcess | undefined;
  const OP_NS = 'e2e-schedules-op';

  afterAll(async () => {
    await operator?.kill();
    await deleteNamespace(OP_NS);
    await deleteNamespace(`${OP_NS}-lease`);
  });

  const start = async (identity: string) => {
    const started = new OperatorProcess({
      kubeconfig: kubeconfigPath(),
      env: {
        REDIS_URL: redisUrl(),
        CHAMVI_REDIS_PREFIX: `sched${Date.now()}`,
        CHAMVI_ALLOW_REPO: 'https://github.com/acme/*',
        CHAMVI_WATCH_NAMESPACES: OP_NS,
        CHAMVI_LEADER_ELECTION_NAMESPACE: `${OP_NS}-lease`,
        CHAMVI_IDENTITY: identity,
      },
    });
    await started.waitForLog('schedule caches synced; scheduling', 60_000);
    return started;
  };

  it('creates a run every minute and, killed and restarted, neither doubles nor misses one', async () => {
    await createNamespace(OP_NS);
    await createNamespace(`${OP_NS}-lease`);
    operator = await start('sched-op-1');
    // The runs fail at once (no script ConfigMap); the history limits keep them all to count.
    await applyIn(OP_NS, [
      {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingSchedule',
        metadata: { name: 'minutely' },
        spec: {
          schedule: '* * * * *',
          concurrencyPolicy: 'Allow',
          successfulRunsHistoryLimit: 100,
          failedRunsHistoryLimit: 100,
          runTemplate: { spec: RUN },
        },
      },
    ]);
    const timesOf = async () =>
      JSON.parse(await kubectlOk(['get', 'crun', '-n', OP_NS, '-l', 'chamvi.dev/schedule=minutely', '-o', 'json'])).items.map((run: Run) =>
        Number(run.metadata.labels['chamvi.dev/scheduled-time']),
      ) as number[];
    const first = await eventually(async () => ((await timesOf()).length >= 1 ? (await timesOf())[0] : undefined), 75_000, 'the first run');
    await operator.kill('SIGKILL');
    // Down across the next scheduled minute; back after it.
    const back = (first + 60) * 1000 + 5_000;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, back - Date.now())));
    operator = await start('sched-op-2');
    const times = await eventually(
      async () => {
        const now = await timesOf();
        return now.includes(first + 60) ? now : undefined;
      },
      30_000,
      'the missed minute to run after the restart',
    );
    // One run per minute, none twice.
    expect(new Set(times).size).toBe(times.length);
    expect([...times].sort()).toEqual(expect.arrayContaining([first, first + 60]));
  }, 240_000);
});
