// The benchmarks' own arithmetic (pure logic; the benchmarks themselves run in `make bench`,
// never as timed tests): how a step's overhead is cut from job pickups and "step done" lines,
// and how kube-controller-manager's client limits are set and read.
import { describe, expect, it } from 'vitest';
import { parseRateLimiterWait, withClientLimits } from '../../test/bench/controller-manager-limits.ts';
import { stepCycles } from '../../test/bench/step-cycles.ts';

describe('step overhead', () => {
  // Step 1 picked up at 1000, its clock started at 1004 (the state load), model 10 ms and
  // tools 6 ms, done (next job enqueued) at 1030; step 2 picked up at 1032.
  const lines = [
    { step: 2, time: 1070, totalMs: 30, modelMs: 12, toolsMs: 5 },
    { step: 1, time: 1030, totalMs: 26, modelMs: 10, toolsMs: 6 },
  ];
  const pickups = new Map([
    [1, 1000],
    [2, 1032],
    [3, 1075],
  ]);

  it('runs from one pickup to the next, less the model and the tools', () => {
    const [first, second] = stepCycles(pickups, lines);
    expect(first).toMatchObject({ step: 1, cycleMs: 32, overheadMs: 16 });
    expect(second).toMatchObject({ step: 2, cycleMs: 43, overheadMs: 26 });
  });

  it('splits it into the state load before the step, the step itself and the hand-over, which add up to it', () => {
    const [first] = stepCycles(pickups, lines);
    expect(first).toMatchObject({ pickupToStartMs: 4, inStepMs: 10, handOverMs: 2 });
    for (const cycle of stepCycles(pickups, lines)) {
      expect(cycle.pickupToStartMs + cycle.inStepMs + cycle.handOverMs).toBeCloseTo(cycle.overheadMs, 9);
    }
  });

  it('leaves out a step whose next pickup was not seen', () => {
    expect(
      stepCycles(
        new Map([
          [1, 1000],
          [2, 1032],
        ]),
        lines,
      ).map((cycle) => cycle.step),
    ).toEqual([1]);
  });
});

describe("kube-controller-manager's client limits", () => {
  it('replace the ones on its command line and keep every other argument', () => {
    const args = ['--kubeconfig=/k', '--kube-api-qps=20', '--controllers=*', '--kube-api-burst=30'];
    expect(withClientLimits(args, { qps: 100_000, burst: 100_000 })).toEqual([
      '--kubeconfig=/k',
      '--controllers=*',
      '--kube-api-qps=100000',
      '--kube-api-burst=100000',
    ]);
    expect(withClientLimits(['--v=2'], { qps: 20, burst: 30 })).toEqual(['--v=2', '--kube-api-qps=20', '--kube-api-burst=30']);
  });

  it('sum the rate limiter histogram over every verb and host', () => {
    const metrics = [
      '# TYPE rest_client_rate_limiter_duration_seconds histogram',
      'rest_client_rate_limiter_duration_seconds_bucket{host="127.0.0.1:6443",verb="POST",le="0.005"} 3',
      'rest_client_rate_limiter_duration_seconds_sum{host="127.0.0.1:6443",verb="POST"} 1.5',
      'rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:6443",verb="POST"} 40',
      'rest_client_rate_limiter_duration_seconds_sum{host="127.0.0.1:6443",verb="PUT"} 0.25',
      'rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:6443",verb="PUT"} 10',
      'rest_client_request_duration_seconds_sum{host="127.0.0.1:6443",verb="PUT"} 9',
    ].join('\n');
    expect(parseRateLimiterWait(metrics)).toEqual({ seconds: 1.75, requests: 50 });
  });
});
