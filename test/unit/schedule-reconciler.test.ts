// The schedule reconciler's writes when the schedule cannot make its run: what it says in status
// and Events, and that it does not throw (a thrown reconcile is retried with nothing in status).
// The gateway is a fake whose status write checks the status as the API server checks it against
// the CRD (a condition message over 32 768 characters: 422), and whose create the test answers.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it, vi } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { CodingRunTemplate } from '../../operator/src/api/coding-run-template.ts';
import { codingScheduleStatus, type CodingSchedule, type CodingScheduleStatus } from '../../operator/src/api/coding-schedule.ts';
import {
  RUN_REFUSED_RETRY_MS,
  ScheduleReconciler,
  type ScheduleReconcilerDeps,
} from '../../operator/src/controller/schedule-reconciler.ts';
import type { CreateRunAnswer, ScheduleGateway, ScheduleRunPage } from '../../operator/src/kube/schedule-gateway.ts';
import type { ListPage } from '../../operator/src/controller/informer.ts';
import { scheduledRunName } from '../../operator/src/reconcile/names.ts';
import type { RunEvent } from '../../operator/src/reconcile/decision.ts';

const RUN = {
  task: 'Update dependencies',
  repository: { url: 'https://github.com/acme/app.git' },
  model: { provider: 'scripted', scriptRef: { name: 's' } },
};

const scheduleWith = (runTemplate: object): CodingSchedule =>
  ({
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingSchedule',
    metadata: { name: 'nightly', namespace: 'team', uid: 'uid-nightly', generation: 1, creationTimestamp: '2026-06-01T10:00:00Z' },
    // Due every minute since 10:00: the reconcile at 10:30:20 creates the 10:30 run.
    spec: { schedule: '* * * * *', runTemplate },
  }) as unknown as CodingSchedule;

/** A run as the API server stores what the schedule sent: a uid, generation 1. */
const stored = (run: object, status?: CodingRun['status']): CodingRun =>
  ({
    ...(run as CodingRun),
    metadata: { ...(run as CodingRun).metadata, uid: 'uid-run', generation: 1 },
    ...(status ? { status } : {}),
  }) as CodingRun;

/** The run for 10:30 (minutes since the epoch), the name the schedule gives it. */
const NAME_1030 = 'nightly-29671830';

function scene(
  schedule: CodingSchedule,
  now = () => new Date('2026-06-01T10:30:20Z'),
  listing: Pick<ScheduleReconcilerDeps, 'runPageLimit' | 'runsKept'> = {},
) {
  const written: CodingScheduleStatus[] = [];
  const events: RunEvent[] = [];
  const kube = {
    getSchedule: vi.fn(async () => schedule),
    getTemplate: vi.fn(async () => undefined),
    listScheduleRuns: vi.fn(async (): Promise<CodingRun[]> => []),
    createRun: vi.fn(async (run: object): Promise<CreateRunAnswer> => ({ created: stored(run) })),
    deleteRun: vi.fn(async () => {}),
    replaceScheduleStatus: vi.fn(async (current: CodingSchedule, status: CodingScheduleStatus) => {
      const checked = codingScheduleStatus.safeParse(status);
      if (!checked.success) throw new ApiException(422, 'Unprocessable Entity', JSON.stringify({ message: checked.error.message }), {});
      written.push(status);
      return { ...current, status };
    }),
  } satisfies ScheduleGateway;
  const warnings: Array<{ fields: object; message: string }> = [];
  const reconciler = new ScheduleReconciler({
    kube,
    events: { record: async (_object, event) => void events.push(event) },
    logger: { info: () => {}, warn: (fields, message) => void warnings.push({ fields, message }), error: () => {} },
    now,
    ...listing,
  });
  const ready = () => written.at(-1)?.conditions?.find((condition) => condition.type === 'Ready');
  return { reconciler, kube, written, events, ready, warnings };
}

describe('a schedule whose spec the operator refuses', () => {
  // The CRD cannot bound a map's keys: a 40 000-character label key passes the API server, and
  // a message that quoted it whole (40 056 characters) made the status write fail at every retry.
  it('says InvalidSchedule in a Ready condition the API server takes, quoting the key cut short, and warns once', async () => {
    const key = 'k'.repeat(40_000);
    const { reconciler, kube, events, ready } = scene(scheduleWith({ metadata: { labels: { [key]: 'x' } }, spec: RUN }));
    await expect(reconciler.reconcile('team/nightly')).resolves.toEqual({});
    expect(kube.replaceScheduleStatus).toHaveBeenCalledTimes(1);
    expect(ready()).toMatchObject({ status: 'False', reason: 'InvalidSchedule' });
    const message = ready()!.message;
    expect(message.length).toBeLessThanOrEqual(32_768);
    expect(message).toMatch(/^spec\.runTemplate\.metadata\.labels\["k{20}/);
    expect(message).not.toContain(key);
    expect(message.length).toBeLessThan(1_000);
    expect(events).toEqual([{ type: 'Warning', reason: 'InvalidSchedule', message }]);
    expect(kube.createRun).not.toHaveBeenCalled();
  });
});

describe('a schedule whose run the API server refuses to store for its size', () => {
  const tooLarge = {
    'etcd (500 "request is too large")': new ApiException(
      500,
      'Internal Server Error',
      JSON.stringify({ kind: 'Status', status: 'Failure', message: 'etcdserver: request is too large', code: 500 }),
      {},
    ),
    'the API server (413)': new ApiException(413, 'Request Entity Too Large', JSON.stringify({ message: 'the request is too large' }), {}),
  };

  it.each(Object.entries(tooLarge))(
    'says RunRefused in status, warns once and tries again in a minute when %s refuses it',
    async (_by, refusal) => {
      const { reconciler, kube, events, ready, written } = scene(scheduleWith({ spec: RUN }));
      kube.createRun.mockRejectedValue(refusal);
      await expect(reconciler.reconcile('team/nightly')).resolves.toEqual({ requeueAfterMs: RUN_REFUSED_RETRY_MS });
      expect(ready()).toMatchObject({ status: 'False', reason: 'RunRefused' });
      expect(ready()!.message).toMatch(/refused the run due at 2026-06-01T10:30:00\.000Z: the run is too large to store .*Shorten/);
      // Not recorded as scheduled: the next try makes the run for the same time.
      expect(written.at(-1)!.lastScheduleTime).toBeUndefined();
      expect(events.map((event) => event.reason)).toEqual(['RunRefused']);
      // The same refusal again: the status already says it, no second Warning.
      kube.getSchedule.mockResolvedValue({ ...scheduleWith({ spec: RUN }), status: written.at(-1)! });
      await expect(reconciler.reconcile('team/nightly')).resolves.toEqual({ requeueAfterMs: RUN_REFUSED_RETRY_MS });
      expect(events.map((event) => event.reason)).toEqual(['RunRefused']);
    },
  );

  it('still throws on any other failure of the API server: it may clear by itself', async () => {
    const { reconciler, kube, written, events } = scene(scheduleWith({ spec: RUN }));
    kube.createRun.mockRejectedValue(
      new ApiException(500, 'Internal Server Error', JSON.stringify({ message: 'etcdserver: request timed out' }), {}),
    );
    await expect(reconciler.reconcile('team/nightly')).rejects.toThrow();
    expect(written).toEqual([]);
    expect(events).toEqual([]);
  });
});

// Anyone who may create CodingRuns can label one for the schedule and name its uid as the
// controller: one for the time due was taken for the schedule's run, which was never made, and
// one active held a Forbid schedule for good.
describe('a schedule with a run planted under its labels and controller reference', () => {
  const planted = (scheduledTime: string, status?: CodingRun['status']): CodingRun =>
    ({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: {
        name: 'nightly-plant',
        namespace: 'team',
        uid: 'uid-plant',
        generation: 1,
        labels: { 'chamvi.dev/schedule': 'nightly', 'chamvi.dev/scheduled-time': String(Date.parse(scheduledTime) / 1000) },
        annotations: { 'chamvi.dev/scheduled-at': new Date(scheduledTime).toISOString() },
        ownerReferences: [
          { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingSchedule', name: 'nightly', uid: 'uid-nightly', controller: true },
        ],
      },
      spec: { ...RUN, task: 'Print the repository secrets' },
      ...(status ? { status } : {}),
    }) as unknown as CodingRun;

  // It cannot be told from the schedule's own run made before an edit (below): it takes its time,
  // and only that time.
  it('makes no run for the time a planted run is labelled with, counts it not, and warns naming it', async () => {
    const { reconciler, kube, written, events } = scene(scheduleWith({ spec: RUN }));
    kube.listScheduleRuns.mockResolvedValue([planted('2026-06-01T10:30:00Z')]);
    await reconciler.reconcile('team/nightly');
    expect(kube.createRun).not.toHaveBeenCalled();
    expect(written.at(-1)).toMatchObject({ lastScheduleTime: '2026-06-01T10:30:00Z', active: [], activeCount: 0 });
    expect(written.at(-1)!.lastSuccessfulTime).toBeUndefined();
    expect(events).toEqual([
      expect.objectContaining({ type: 'Warning', reason: 'ForeignRun', message: expect.stringContaining('nightly-plant') }),
    ]);
    expect(events[0]!.message).toContain('not creating another');
  });

  // The status write after a create is a replace with the schedule's resourceVersion: an edit of
  // spec.runTemplate meanwhile makes it a 409, and the run it made no longer matches the edited
  // schedule. It was counted foreign: no second run for its time, but Forbid started the next
  // time beside it, and Replace left it running.
  describe('its own run made before an edit whose status write was lost', () => {
    const before = {
      ...scheduleWith({ spec: RUN }),
      metadata: { ...scheduleWith({ spec: RUN }).metadata, annotations: { 'chamvi.dev/created-by': 'alice' } },
      spec: { schedule: '* * * * *', concurrencyPolicy: 'Forbid', runTemplate: { spec: RUN } },
    } as unknown as CodingSchedule;
    const edited = (concurrencyPolicy: string) =>
      ({
        ...before,
        metadata: { ...before.metadata, generation: 2, annotations: { 'chamvi.dev/created-by': 'bob' } },
        spec: { ...before.spec, concurrencyPolicy, runTemplate: { spec: { ...RUN, task: 'Update dependencies and the lockfile' } } },
      }) as unknown as CodingSchedule;

    async function madeThenLost(concurrencyPolicy: string) {
      let now = new Date('2026-06-01T10:30:20Z');
      const found = scene(before, () => now);
      found.kube.replaceScheduleStatus.mockRejectedValueOnce(new ApiException(409, 'Conflict', JSON.stringify({ reason: 'Conflict' }), {}));
      await expect(found.reconciler.reconcile('team/nightly')).rejects.toThrow();
      expect(found.kube.createRun).toHaveBeenCalledTimes(1);
      const running = stored(found.kube.createRun.mock.calls[0]![0], { phase: 'Running' } as CodingRun['status']);
      expect(running.metadata.name).toBe(NAME_1030);
      found.kube.getSchedule.mockResolvedValue(edited(concurrencyPolicy));
      found.kube.listScheduleRuns.mockResolvedValue([running]);
      await found.reconciler.reconcile('team/nightly');
      // The same time again: its run is found, and recorded as its own.
      expect(found.kube.createRun).toHaveBeenCalledTimes(1);
      expect(found.written.at(-1)).toMatchObject({
        lastScheduleTime: '2026-06-01T10:30:00Z',
        active: [{ name: NAME_1030 }],
        activeCount: 1,
      });
      expect(found.events.map((event) => event.reason)).not.toContain('ForeignRun');
      now = new Date('2026-06-01T10:31:20Z');
      found.kube.getSchedule.mockResolvedValue({ ...edited(concurrencyPolicy), status: found.written.at(-1)! });
      return found;
    }

    it('Forbid: records it as its own for its time, and holds the next time while it runs', async () => {
      const { reconciler, kube, written } = await madeThenLost('Forbid');
      await reconciler.reconcile('team/nightly');
      expect(kube.createRun).toHaveBeenCalledTimes(1);
      expect(written.at(-1)).toMatchObject({ lastScheduleTime: '2026-06-01T10:30:00Z', active: [{ name: NAME_1030 }], activeCount: 1 });
    });

    it('Forbid, the status write lost again: the next time is still held', async () => {
      const { reconciler, kube } = await madeThenLost('Forbid');
      // As if the write that recorded it never happened either: nothing lists it active.
      kube.getSchedule.mockResolvedValue({ ...edited('Forbid'), status: { lastScheduleTime: '2026-06-01T10:30:00Z' } } as CodingSchedule);
      await reconciler.reconcile('team/nightly');
      expect(kube.createRun).toHaveBeenCalledTimes(1);
    });

    it('Replace: deletes it, by its uid, and makes the next run', async () => {
      const { reconciler, kube, events } = await madeThenLost('Replace');
      await reconciler.reconcile('team/nightly');
      expect(kube.deleteRun).toHaveBeenCalledWith('team', NAME_1030, 'uid-run');
      expect(kube.createRun).toHaveBeenCalledTimes(2);
      expect((kube.createRun.mock.calls[1]![0] as CodingRun).metadata.name).toBe('nightly-29671831');
      expect(events.map((event) => event.reason)).toContain('RunReplaced');
    });
  });

  it('still finds its own run made before a lost status write, and makes none again', async () => {
    const first = scene(scheduleWith({ spec: RUN }));
    first.kube.replaceScheduleStatus.mockRejectedValueOnce(new Error('operator killed before the status write'));
    await expect(first.reconciler.reconcile('team/nightly')).rejects.toThrow('killed');
    const held = stored(first.kube.createRun.mock.calls[0]![0]);
    const again = scene(scheduleWith({ spec: RUN }));
    again.kube.listScheduleRuns.mockResolvedValue([held, planted('2026-06-01T10:30:00Z')]);
    await again.reconciler.reconcile('team/nightly');
    expect(again.kube.createRun).not.toHaveBeenCalled();
    expect(again.written.at(-1)).toMatchObject({ lastScheduleTime: '2026-06-01T10:30:00Z', active: [{ name: NAME_1030 }] });
  });

  it('Forbid: an active run planted under a name the schedule never gives holds nothing', async () => {
    const { reconciler, kube, written } = scene(scheduleWith({ spec: RUN }));
    kube.getSchedule.mockResolvedValue({
      ...scheduleWith({ spec: RUN }),
      spec: { schedule: '* * * * *', concurrencyPolicy: 'Forbid', runTemplate: { spec: RUN } },
      status: { lastScheduleTime: '2026-06-01T10:29:00Z' },
    } as unknown as CodingSchedule);
    const elsewhere = planted('2026-06-01T10:29:00Z', { phase: 'Running' } as CodingRun['status']);
    elsewhere.metadata.name = 'nightly-planted-by-hand';
    kube.listScheduleRuns.mockResolvedValue([elsewhere]);
    await reconciler.reconcile('team/nightly');
    expect(kube.createRun).toHaveBeenCalledTimes(1);
    expect(written.at(-1)!.active?.map((active) => active.name)).toEqual([NAME_1030]);
  });

  it('a finished planted run is neither its last success nor history it deletes', async () => {
    const { reconciler, kube, written } = scene(scheduleWith({ spec: RUN }));
    kube.getSchedule.mockResolvedValue({
      ...scheduleWith({ spec: RUN }),
      spec: { schedule: '* * * * *', successfulRunsHistoryLimit: 0, runTemplate: { spec: RUN } },
    } as unknown as CodingSchedule);
    kube.listScheduleRuns.mockResolvedValue([
      planted('2026-06-01T10:29:00Z', { phase: 'Succeeded', completionTime: '2026-06-01T10:29:30Z' } as CodingRun['status']),
    ]);
    await reconciler.reconcile('team/nightly');
    expect(written.at(-1)!.lastSuccessfulTime).toBeUndefined();
    expect(kube.deleteRun).not.toHaveBeenCalled();
  });
});

// Each time has one run name: a create sent again for it (its answer lost, a second replica, a
// list that missed the run) is refused AlreadyExists, and the run holding the name is read.
describe('a create for a time whose name is already held', () => {
  it('records the run as its own when the schedule controls it, and makes no second', async () => {
    const { reconciler, kube, written, events } = scene(scheduleWith({ spec: RUN }));
    kube.createRun.mockImplementationOnce(async (run: object) => ({ taken: stored(run, { phase: 'Running' } as CodingRun['status']) }));
    await expect(reconciler.reconcile('team/nightly')).resolves.toEqual({ requeueAfterMs: 40_000 });
    expect(kube.createRun).toHaveBeenCalledTimes(1);
    expect(written).toHaveLength(1);
    expect(written[0]).toMatchObject({ lastScheduleTime: '2026-06-01T10:30:00Z', active: [{ name: NAME_1030 }], activeCount: 1 });
    expect(events.map((event) => event.reason)).not.toContain('ForeignRun');
  });

  it('never adopts a run under the name that does not name the schedule as its controller: the time is taken, ForeignRun', async () => {
    const { reconciler, kube, written, events } = scene(scheduleWith({ spec: RUN }));
    kube.createRun.mockImplementationOnce(async (run: object) => {
      const held = stored(run, { phase: 'Running' } as CodingRun['status']);
      (held.metadata as unknown as { ownerReferences: unknown[] }).ownerReferences = [];
      return { taken: held };
    });
    await reconciler.reconcile('team/nightly');
    expect(kube.createRun).toHaveBeenCalledTimes(1);
    expect(written.at(-1)).toMatchObject({ lastScheduleTime: '2026-06-01T10:30:00Z', active: [], activeCount: 0 });
    expect(events).toEqual([
      expect.objectContaining({ type: 'Warning', reason: 'ForeignRun', message: expect.stringContaining(NAME_1030) }),
    ]);
  });

  it('writes nothing and tries again when the run holding the name was gone when read', async () => {
    const { reconciler, kube, written, events } = scene(scheduleWith({ spec: RUN }));
    kube.createRun.mockResolvedValueOnce({ taken: undefined });
    await expect(reconciler.reconcile('team/nightly')).rejects.toThrow(/gone when read/);
    expect(written).toEqual([]);
    expect(events).toEqual([]);
  });
});

/** The API server's date-time format (kube-openapi strfmt): RFC 3339, a year of four digits. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const dateTimesOf = (status: CodingScheduleStatus) => [
  ...(status.active ?? []).map((active) => active.scheduledTime),
  ...[status.lastScheduleTime, status.lastSuccessfulTime, status.lastMissedTime, status.nextScheduleTime].filter((time) => time),
  ...(status.conditions ?? []).map((condition) => condition.lastTransitionTime),
];

/**
 * A scene whose runs are kept as the API server keeps them: created, listed and deleted, each
 * run's phase set by the test. Status writes as scene's, and refused (422) when a date-time
 * field is not one the API server takes.
 */
function sceneWithRuns(schedule: CodingSchedule, now: () => Date) {
  const found = scene(schedule, now);
  const runs = new Map<string, CodingRun>();
  found.kube.listScheduleRuns.mockImplementation(async () => [...runs.values()]);
  found.kube.createRun.mockImplementation(async (run: object) => {
    const made = stored(run);
    made.metadata.uid = `uid-${made.metadata.name}`;
    runs.set(made.metadata.name, made);
    return { created: made };
  });
  found.kube.deleteRun.mockImplementation(async (...[, name]: unknown[]) => void runs.delete(name as string));
  const writeStatus = found.kube.replaceScheduleStatus.getMockImplementation()!;
  found.kube.replaceScheduleStatus.mockImplementation(async (current: CodingSchedule, status: CodingScheduleStatus) => {
    const refused = dateTimesOf(status).find((time) => !RFC3339.test(time!));
    if (refused) {
      throw new ApiException(422, 'Unprocessable Entity', JSON.stringify({ message: `${refused} must be of type date-time` }), {});
    }
    return writeStatus(current, status);
  });
  const finish = (phase: 'Succeeded' | 'Failed') => {
    for (const run of runs.values()) {
      if (!run.status?.phase) run.status = { phase, completionTime: now().toISOString() } as CodingRun['status'];
    }
  };
  return { ...found, runs, finish };
}

// Whoever may create CodingRuns could plant one for the year 10000 (12 digits of Unix seconds):
// listed in status.active as "+010000-01-01T00:00:00Z", it made every status write a 422, so
// lastScheduleTime never moved; with history limit 0 the run for the time due, once finished,
// was deleted as history and made again at the next reconcile.
describe('a schedule with a run planted for a time past the year 9999', () => {
  it('counts it not, writes its status, and makes the run for the time due once', async () => {
    let now = new Date('2026-06-01T10:30:20Z');
    const schedule = {
      ...scheduleWith({ spec: RUN }),
      spec: { schedule: '* * * * *', concurrencyPolicy: 'Allow', successfulRunsHistoryLimit: 0, runTemplate: { spec: RUN } },
    } as unknown as CodingSchedule;
    const { reconciler, kube, written, runs, finish } = sceneWithRuns(schedule, () => now);
    const far = new Date(253_402_300_800 * 1000);
    runs.set('nightly-4223371680', {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: {
        name: 'nightly-4223371680',
        namespace: 'team',
        uid: 'uid-plant',
        labels: { 'chamvi.dev/schedule': 'nightly', 'chamvi.dev/scheduled-time': '253402300800' },
        annotations: { 'chamvi.dev/scheduled-at': far.toISOString() },
        ownerReferences: [
          { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingSchedule', name: 'nightly', uid: 'uid-nightly', controller: true },
        ],
      },
      spec: RUN,
      status: { phase: 'WaitingForApproval' },
    } as unknown as CodingRun);

    // Each reconcile reads the status last written; the run for 10:30 finishes after the first,
    // and its phase change wakes the schedule twice more within the minute.
    const refused: unknown[] = [];
    for (const seconds of [20, 40, 50]) {
      now = new Date(`2026-06-01T10:30:${seconds}Z`);
      kube.getSchedule.mockResolvedValue({ ...schedule, ...(written.length > 0 ? { status: written.at(-1)! } : {}) });
      await reconciler.reconcile('team/nightly').catch((error: unknown) => refused.push(error));
      if (seconds === 20) finish('Succeeded');
    }
    expect(kube.createRun).toHaveBeenCalledTimes(1);
    expect(refused).toEqual([]);
    expect(written[0]).toMatchObject({ lastScheduleTime: '2026-06-01T10:30:00Z', active: [{ name: NAME_1030 }], activeCount: 1 });
    expect([...runs.keys()]).toEqual(['nightly-4223371680']);
    expect(written.at(-1)).toMatchObject({ lastScheduleTime: '2026-06-01T10:30:00Z', active: [], activeCount: 0 });
  });
});

// A status write refused for any cause (a 409 at every try while the schedule is edited, a
// field the API server will not take): the run made for the time is the only record that the
// time was handled. Deleted as history (limit 0) once it finished, it was made again.
describe('a schedule whose status writes fail after it made its run', () => {
  it('keeps the finished run for the time due past the history limit, and makes no second run for the time', async () => {
    let now = new Date('2026-06-01T10:30:20Z');
    const schedule = {
      ...scheduleWith({ spec: RUN }),
      spec: { schedule: '* * * * *', concurrencyPolicy: 'Allow', successfulRunsHistoryLimit: 0, runTemplate: { spec: RUN } },
    } as unknown as CodingSchedule;
    const { reconciler, kube, runs, finish } = sceneWithRuns(schedule, () => now);
    kube.replaceScheduleStatus.mockRejectedValue(new ApiException(409, 'Conflict', JSON.stringify({ reason: 'Conflict' }), {}));
    await expect(reconciler.reconcile('team/nightly')).rejects.toThrow();
    finish('Succeeded');
    for (const seconds of [40, 50]) {
      now = new Date(`2026-06-01T10:30:${seconds}Z`);
      await expect(reconciler.reconcile('team/nightly')).rejects.toThrow();
    }
    expect(kube.createRun).toHaveBeenCalledTimes(1);
    expect(kube.deleteRun).not.toHaveBeenCalled();
    expect([...runs.keys()]).toEqual([NAME_1030]);
  });
});

// Nothing watches templates, so a schedule whose template is missing looks again by itself; at a
// fixed 30 s, 10 000 such schedules (three reads each, a list among them) kept the loop busy.
describe('a schedule whose template problem stays', () => {
  const missing = {
    ...scheduleWith({}),
    spec: { schedule: '0 3 * * *', templateRef: { name: 'webapp' } },
  } as unknown as CodingSchedule;
  const template = (resourceVersion: string) =>
    ({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRunTemplate',
      metadata: { name: 'webapp', namespace: 'team', uid: 'uid-template', resourceVersion },
      // No task: every run from it is InvalidRunSpec.
      spec: { repository: RUN.repository, model: RUN.model },
    }) as unknown as CodingRunTemplate;
  const waits = async (reconciler: ScheduleReconciler, times: number) => {
    const found: Array<number | undefined> = [];
    for (let i = 0; i < times; i++) found.push((await reconciler.reconcile('team/nightly')).requeueAfterMs);
    return found;
  };

  it('looks again less often each time the same TemplateNotFound is found, up to 10 minutes', async () => {
    const { reconciler, ready } = scene(missing);
    expect(await waits(reconciler, 7)).toEqual([30_000, 60_000, 120_000, 240_000, 480_000, 600_000, 600_000]);
    expect(ready()).toMatchObject({ status: 'False', reason: 'TemplateNotFound' });
  });

  it('forgets a deleted schedule: one made again under its name starts from 30 s', async () => {
    const { reconciler } = scene(missing);
    await waits(reconciler, 4);
    reconciler.forget('team/nightly');
    expect(reconciler.problemsKept).toBe(0);
    expect(await waits(reconciler, 1)).toEqual([30_000]);
  });

  it('keeps no count for a problem it never looks at again: schedules made invalid and deleted in a loop grow nothing', async () => {
    const { reconciler, kube } = scene(missing);
    for (let i = 0; i < 200; i++) {
      const invalid = {
        ...missing,
        metadata: { ...missing.metadata, name: `s-${i}`, uid: `uid-${i}` },
        spec: { ...missing.spec, schedule: '61 * * * *' },
      };
      kube.getSchedule.mockResolvedValue(invalid as CodingSchedule);
      await expect(reconciler.reconcile(`team/s-${i}`)).resolves.toEqual({});
    }
    expect(reconciler.problemsKept).toBe(0);
  });

  it('starts again from 30 s when the schedule is edited', async () => {
    const { reconciler, kube } = scene(missing);
    await waits(reconciler, 4);
    kube.getSchedule.mockResolvedValue({ ...missing, metadata: { ...missing.metadata, generation: 2 } } as CodingSchedule);
    expect(await waits(reconciler, 2)).toEqual([30_000, 60_000]);
  });

  it('starts again from 30 s when the template changes, though the problem reads the same', async () => {
    const { reconciler, kube, ready } = scene(missing);
    kube.getTemplate.mockResolvedValue(template('1') as never);
    expect(await waits(reconciler, 3)).toEqual([30_000, 60_000, 120_000]);
    expect(ready()).toMatchObject({ status: 'False', reason: 'InvalidRunSpec' });
    kube.getTemplate.mockResolvedValue(template('2') as never);
    expect(await waits(reconciler, 2)).toEqual([30_000, 60_000]);
  });
});

// Anyone who may create CodingRuns can label runs of ~1.5 MiB each for a schedule, and each
// phase change of one wakes it: a list answered whole held all of them, and their parsed copy,
// against the operator's 160 MiB heap at every reconcile.
describe('a schedule with more runs than a page of the list', () => {
  const PAGE = 2;
  const TASK_BYTES = 100 * 1024;
  /** The every-minute schedule with these fields of its spec besides. */
  const withLimits = (fields: object) => {
    const schedule = scheduleWith({ spec: RUN });
    return { ...schedule, spec: { ...schedule.spec, ...fields } } as CodingSchedule;
  };
  /** The schedule's own run for the time, as the schedule made it, with a task of TASK_BYTES. */
  const ownRun = (scheduledTime: string, phase: 'Running' | 'Succeeded'): CodingRun => {
    const time = new Date(scheduledTime);
    return {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: {
        name: scheduledRunName('nightly', time),
        namespace: 'team',
        uid: `uid-${time.getUTCMinutes()}`,
        generation: 1,
        labels: { 'chamvi.dev/schedule': 'nightly', 'chamvi.dev/scheduled-time': String(time.getTime() / 1000) },
        annotations: { 'chamvi.dev/scheduled-at': time.toISOString() },
        ownerReferences: [
          { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingSchedule', name: 'nightly', uid: 'uid-nightly', controller: true },
        ],
      },
      spec: { ...RUN, task: `${scheduledTime} ${'t'.repeat(TASK_BYTES)}` },
      status: { phase, ...(phase === 'Succeeded' ? { completionTime: new Date(time.getTime() + 30_000).toISOString() } : {}) },
    } as unknown as CodingRun;
  };
  const minutes = (from: number, to: number) =>
    Array.from({ length: to - from + 1 }, (_, index) => `2026-06-01T10:${String(from + index).padStart(2, '0')}:00Z`);

  /**
   * Answers as the API server does: in name order, at most `limit` from the `continue` token, all
   * at once when asked with no limit. Each answer is made afresh, as a list parsed from the wire,
   * and nothing here holds it: a vi.fn would keep every answer in its mock.results.
   */
  function apiServer(make: () => CodingRun[]) {
    const asked: Array<ListPage | undefined> = [];
    const list = async (_namespace: string, _name: string, page?: ListPage): Promise<ScheduleRunPage> => {
      asked.push(page);
      const all = make().sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
      const from = Number(page?.continue ?? 0);
      const to = page?.limit ? from + page.limit : all.length;
      return Object.assign(all.slice(from, to), to < all.length ? { continue: String(to) } : {});
    };
    return { list, asked };
  }

  it('asks for every page at the page limit and decides over all of them: history past the limit goes from each page', async () => {
    const { reconciler, kube } = scene(withLimits({ successfulRunsHistoryLimit: 1 }), undefined, { runPageLimit: PAGE });
    const times = minutes(23, 29);
    const server = apiServer(() => times.map((time) => ownRun(time, 'Succeeded')));
    Object.assign(kube, { listScheduleRuns: server.list });
    await reconciler.reconcile('team/nightly');
    expect(server.asked.map((page) => page?.limit)).toEqual([PAGE, PAGE, PAGE, PAGE]);
    // All but the newest finished run, the oldest from the first page and the last from the fourth.
    const deleted = kube.deleteRun.mock.calls.map((call) => (call as unknown[])[1]);
    expect(deleted.sort()).toEqual(times.slice(0, -1).map((time) => scheduledRunName('nightly', new Date(time))));
    expect(kube.createRun).toHaveBeenCalledTimes(1);
  });

  it('holds at most a page of runs at once while it lists, and keeps no spec of any after: a 100 KiB task is let go', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { reconciler, kube } = scene(withLimits({ concurrencyPolicy: 'Allow' }), undefined, { runPageLimit: PAGE });
    const specs: Array<WeakRef<object>> = [];
    const alive = async () => {
      // WeakRefs made or read in this job hold their objects until it ends.
      await new Promise((resolve) => setTimeout(resolve, 0));
      gc();
      return specs.filter((spec) => spec.deref() !== undefined).length;
    };
    const held: number[] = [];
    const server = apiServer(() => minutes(24, 29).map((time) => ownRun(time, 'Running')));
    Object.assign(kube, {
      listScheduleRuns: async (namespace: string, name: string, page?: ListPage) => {
        const before = await alive();
        const answer = await server.list(namespace, name, page);
        for (const run of answer) specs.push(new WeakRef(run.spec));
        held.push(before + answer.length);
        return answer;
      },
    });
    let afterList: number | undefined;
    kube.createRun.mockImplementation(async (run: object) => {
      afterList = await alive();
      return { created: stored(run) };
    });
    await reconciler.reconcile('team/nightly');
    expect(specs).toHaveLength(6);
    expect(Math.max(...held)).toBeLessThanOrEqual(PAGE);
    expect(afterList).toBe(0);
    // All six were seen: active, listed in status beside the run just made.
    expect(kube.replaceScheduleStatus.mock.calls.at(-1)![1]).toMatchObject({ activeCount: 7 });
  });

  it('keeps the newest runs up to its bound and says how many it left out', async () => {
    const { reconciler, kube, written, warnings } = scene(withLimits({ concurrencyPolicy: 'Allow' }), undefined, {
      runPageLimit: PAGE,
      runsKept: 3,
    });
    const server = apiServer(() => minutes(22, 29).map((time) => ownRun(time, 'Running')));
    Object.assign(kube, { listScheduleRuns: server.list });
    await reconciler.reconcile('team/nightly');
    expect(written.at(-1)!.active!.map((active) => active.scheduledTime)).toEqual([
      '2026-06-01T10:27:00Z',
      '2026-06-01T10:28:00Z',
      '2026-06-01T10:29:00Z',
      '2026-06-01T10:30:00Z',
    ]);
    expect(warnings).toEqual([expect.objectContaining({ fields: expect.objectContaining({ leftOut: 5, kept: 3 }) })]);
  });
});
