// A schedule reconcile still running when the controller is stopped (the lease lost, or
// shutdown) writes nothing more: its list of runs came back late, after another replica may have
// taken over and created the run due itself. The gateway is a fake whose list the test answers.
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it, vi } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { CodingSchedule } from '../../operator/src/api/coding-schedule.ts';
import { ScheduleController } from '../../operator/src/controller/schedule-controller.ts';
import type { ScheduleGateway } from '../../operator/src/kube/schedule-gateway.ts';

const NOW = new Date('2026-06-01T10:30:20Z');

// Due every minute since 10:00: a reconcile at NOW creates the 10:30 run.
const schedule = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingSchedule',
  metadata: { name: 'nightly', namespace: 'team', uid: 'uid-nightly', generation: 1, creationTimestamp: '2026-06-01T10:00:00Z' },
  spec: {
    schedule: '* * * * *',
    runTemplate: {
      spec: {
        task: 'Update dependencies',
        repository: { url: 'https://github.com/acme/app.git' },
        model: { provider: 'scripted', scriptRef: { name: 's' } },
      },
    },
  },
} as unknown as CodingSchedule;

/** A schedule controller whose run list resolves only when the test says; never started (no cluster is reached). */
function scene() {
  let answerList: (runs: CodingRun[]) => void = () => {};
  let listAsked: () => void = () => {};
  const listed = new Promise<void>((resolve) => (listAsked = resolve));
  const kube = {
    getSchedule: vi.fn(async () => schedule),
    getTemplate: vi.fn(async () => undefined),
    listScheduleRuns: vi.fn(() => {
      listAsked();
      return new Promise<CodingRun[]>((resolve) => (answerList = resolve));
    }),
    createRun: vi.fn(async (run: object) => ({ created: run as CodingRun })),
    deleteRun: vi.fn(async () => {}),
    replaceScheduleStatus: vi.fn(async (current: CodingSchedule) => current),
  } satisfies ScheduleGateway;
  const events = { record: vi.fn(async () => {}) };
  const infos: string[] = [];
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: 'http://127.0.0.1:9', skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const controller = new ScheduleController(
    kubeConfig,
    { watchNamespaces: [] },
    { kube, events, now: () => NOW },
    { info: (_fields, message) => infos.push(message), warn: () => {}, error: () => {} },
  );
  return { controller, kube, events, infos, listed, answerList: (runs: CodingRun[]) => answerList(runs) };
}

describe('a schedule reconcile in flight when the controller stops', () => {
  it('creates no run, writes no status and records no Event once its late list of runs comes back', async () => {
    const { controller, kube, events, infos, listed, answerList } = scene();
    const reconciling = controller.reconciler.reconcile('team/nightly');
    await listed;
    // The lease is lost while the list is slow; the new leader creates the 10:30 run itself.
    controller.stop();
    answerList([]);
    const result = await reconciling;
    expect(kube.createRun).not.toHaveBeenCalled();
    expect(kube.deleteRun).not.toHaveBeenCalled();
    expect(kube.replaceScheduleStatus).not.toHaveBeenCalled();
    expect(events.record).not.toHaveBeenCalled();
    expect(result).toEqual({});
    expect(infos).toContain('schedule reconcile stopped before its next write: this replica no longer leads');
  });

  it('creates the run due when the controller is not stopped', async () => {
    const { controller, kube, listed, answerList } = scene();
    const reconciling = controller.reconciler.reconcile('team/nightly');
    await listed;
    answerList([]);
    await reconciling;
    expect(kube.createRun).toHaveBeenCalledTimes(1);
    expect(kube.replaceScheduleStatus).toHaveBeenCalledTimes(1);
  });
});
