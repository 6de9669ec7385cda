// The schedule reconciler's writes when the schedule cannot make its run: what it says in status
// and Events, and that it does not throw (a thrown reconcile is retried with nothing in status).
// The gateway is a fake whose status write checks the status as the API server checks it against
// the CRD (a condition message over 32 768 characters: 422), and whose create the test answers.
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it, vi } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { codingScheduleStatus, type CodingSchedule, type CodingScheduleStatus } from '../../operator/src/api/coding-schedule.ts';
import { RUN_REFUSED_RETRY_MS, ScheduleReconciler } from '../../operator/src/controller/schedule-reconciler.ts';
import type { ScheduleGateway } from '../../operator/src/kube/schedule-gateway.ts';
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

function scene(schedule: CodingSchedule) {
  const written: CodingScheduleStatus[] = [];
  const events: RunEvent[] = [];
  const kube = {
    getSchedule: vi.fn(async () => schedule),
    getTemplate: vi.fn(async () => undefined),
    listScheduleRuns: vi.fn(async (): Promise<CodingRun[]> => []),
    createRun: vi.fn(async (run: object): Promise<CodingRun> => ({
      ...(run as CodingRun),
      metadata: { ...(run as CodingRun).metadata, name: 'nightly-x7k2p' },
    })),
    deleteRun: vi.fn(async () => {}),
    replaceScheduleStatus: vi.fn(async (current: CodingSchedule, status: CodingScheduleStatus) => {
      const checked = codingScheduleStatus.safeParse(status);
      if (!checked.success) throw new ApiException(422, 'Unprocessable Entity', JSON.stringify({ message: checked.error.message }), {});
      written.push(status);
      return { ...current, status };
    }),
  } satisfies ScheduleGateway;
  const reconciler = new ScheduleReconciler({
    kube,
    events: { record: async (_object, event) => void events.push(event) },
    logger: { info: () => {}, warn: () => {}, error: () => {} },
    now: () => new Date('2026-06-01T10:30:20Z'),
  });
  const ready = () => written.at(-1)?.conditions?.find((condition) => condition.type === 'Ready');
  return { reconciler, kube, written, events, ready };
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
