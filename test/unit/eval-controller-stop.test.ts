// An eval reconcile still running when the controller is stopped (the lease lost, or shutdown)
// writes nothing more: its reads of a finished run's transcript came back late, after another
// replica may have taken over, graded the run and created the next attempt's run itself. The
// gateway is a fake whose transcript read the test answers.
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it, vi } from 'vitest';
import type { CodingRun } from '../../operator/src/api/index.ts';
import type { CodingEval } from '../../operator/src/api/coding-eval.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { EvalController } from '../../operator/src/controller/eval-controller.ts';
import { EvalReconciler } from '../../operator/src/controller/eval-reconciler.ts';
import type { EvalGateway } from '../../operator/src/kube/eval-gateway.ts';
import { attemptRunFixture, codingEvalFixture } from '../support/coding-eval-fixture.ts';

// Two attempts, one at a time: grading the first one's run lets the eval create the second's.
const evaluation = codingEvalFixture({ status: { phase: 'Running', planned: 2, graded: 0 } });

/** The first attempt's run, made by the eval and finished. */
const finishedRun = (): CodingRun =>
  attemptRunFixture(evaluation, 1, { status: { phase: 'Succeeded', reason: 'Completed', steps: 1 } as CodingRun['status'] });

/** An eval reconciler whose read of the finished run's transcript resolves only when the test says. */
function scene() {
  let answerTranscript: () => void = () => {};
  let transcriptAsked: () => void = () => {};
  const reading = new Promise<void>((resolve) => (transcriptAsked = resolve));
  const gateway = {
    createRun: vi.fn(async () => 'created' as const),
    getRun: vi.fn(async () => undefined),
    listTranscript: vi.fn(() => {
      transcriptAsked();
      return new Promise<void>((resolve) => (answerTranscript = resolve));
    }),
    getDiffConfigMap: vi.fn(async () => undefined),
    replaceEvalStatus: vi.fn(async (current: CodingEval) => current),
    recordEvent: vi.fn(async () => {}),
  } satisfies EvalGateway;
  const infos: string[] = [];
  const run = finishedRun();
  const reconciler = new EvalReconciler({
    evals: { get: () => evaluation, list: () => [evaluation] },
    runs: { get: () => run, list: () => [run] },
    gateway,
    identity: 'test',
    logger: { info: (_fields, message) => infos.push(message), warn: () => {} },
    now: () => new Date('2026-11-30T12:00:00Z'),
  });
  return { reconciler, gateway, infos, reading, answerTranscript: () => answerTranscript() };
}

describe('an eval reconcile in flight when the controller stops', () => {
  it('creates no run, writes no status and records no Event once its late transcript read comes back', async () => {
    const { reconciler, gateway, infos, reading, answerTranscript } = scene();
    const reconciling = reconciler.reconcile('team/bench');
    await reading;
    // The lease is lost while the read is slow; the new leader grades the run and creates attempt 2's.
    reconciler.stop();
    answerTranscript();
    await expect(reconciling).resolves.toBeUndefined();
    expect(gateway.createRun).not.toHaveBeenCalled();
    expect(gateway.replaceEvalStatus).not.toHaveBeenCalled();
    expect(gateway.recordEvent).not.toHaveBeenCalled();
    expect(infos).toContain('eval reconcile stopped before its next write: this replica no longer leads');
  });

  it('grades the run and creates the next attempt when the controller is not stopped', async () => {
    const { reconciler, gateway, reading, answerTranscript } = scene();
    const reconciling = reconciler.reconcile('team/bench');
    await reading;
    answerTranscript();
    await reconciling;
    expect(gateway.createRun).toHaveBeenCalledTimes(1);
    expect(gateway.replaceEvalStatus).toHaveBeenCalledTimes(1);
  });

  it('is what stopping the eval controller does', () => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'c', server: 'http://127.0.0.1:9', skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const logger = { info: () => {}, warn: () => {}, error: () => {} };
    const controller = new EvalController(kubeConfig, loadOperatorConfig({}, {}), scene().gateway, logger);
    const stop = vi.spyOn(controller.reconciler, 'stop');
    controller.stop();
    expect(stop).toHaveBeenCalledTimes(1);
  });
});
