// The benchmarks' own arithmetic (pure logic; the benchmarks themselves run in `make bench`,
// never as timed tests): how a step's overhead is cut from job pickups and "step done" lines,
// how the step goal is judged, how kube-controller-manager's client limits are set and read, how
// the scale goals are judged, and whose requests the scale benchmark counts as the operator's.
import { describe, expect, it } from 'vitest';
import { garbageCollectorRunReads, GARBAGE_COLLECTOR_RUN_READS, moveGarbageCollectorReads } from '../../test/bench/api-request-counter.ts';
import { parseRateLimiterWait, withClientLimits } from '../../test/bench/controller-manager-limits.ts';
import { scaleGoals } from '../../test/bench/scale-goals.ts';
import { medianRun, stepCycles, stepOverheadGoal } from '../../test/bench/step-cycles.ts';

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

describe('the step goal (#17.5)', () => {
  it('is met only strictly under 10 ms (round one judged 15 ms: 12 ms is not met)', () => {
    expect(stepOverheadGoal(9.99)).toEqual({ goal: 'overhead p50 < 10 ms (#17.5)', met: true });
    expect(stepOverheadGoal(10).met).toBe(false);
    expect(stepOverheadGoal(12).met).toBe(false);
  });

  it('is judged on the run with the median p50 of several (the lower middle one for an even count)', () => {
    const run = (p50: number) => ({ overheadMs: { p50 }, id: p50 });
    expect(medianRun([run(12), run(9), run(10.5)]).id).toBe(10.5);
    expect(medianRun([run(12), run(9), run(10.5), run(8)]).id).toBe(9);
    expect(medianRun([run(11)]).id).toBe(11);
    expect(() => medianRun([])).toThrow(/no step bench run/);
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

describe('the scale goals (#17.5)', () => {
  const phase = (allPodsMs: number | null, allDoneMs: number | null, controllerPerObject: number) => ({
    allPodsMs,
    allDoneMs,
    apiRequests: { controllerPerObject },
  });
  // The 2026-12-01 19:45 run: runs 40.2 s / 273.9 s, Jobs unlimited 9.9 / 18.6 s, at defaults 122.2 / 298.6 s.
  const runs = phase(40_200, 273_900, 27.05);
  const peers = { unlimited: phase(9_900, 18_600, 7.02), atDefaults: phase(122_200, 298_600, 6.07) };

  it('judges the finish time against the Job controller at its default limits, not the unlimited one', () => {
    const goals = scaleGoals(1000, runs, 250.4, peers);
    expect(goals.allFinishedWithinJobController).toMatchObject({ shown: '0.92x', met: true });
    expect(scaleGoals(1000, phase(40_200, 330_000, 27), 250, peers).allFinishedWithinJobController).toMatchObject({
      shown: '1.11x',
      met: false,
    });
    // 1.104x shows as 1.1x but is over the goal.
    expect(scaleGoals(1000, phase(40_200, 329_650, 27), 250, peers).allFinishedWithinJobController).toMatchObject({
      shown: '1.1x',
      met: false,
    });
  });

  it('compares pod creation with the peer at the operator’s limits, when it ran', () => {
    expect(scaleGoals(1000, runs, 250.4, peers).podsNoSlowerThanJobController).toMatchObject({ shown: '4.06x', met: false });
    expect(scaleGoals(1000, runs, 250.4, { atDefaults: peers.atDefaults }).podsNoSlowerThanJobController).toMatchObject({
      shown: '0.33x',
      met: true,
    });
  });

  it('holds the operator process alone under 256 MiB and the requests per run at 12', () => {
    const goals = scaleGoals(1000, runs, 250.4, peers);
    expect(goals.operatorPeakRss).toMatchObject({ shown: '250.4 MiB', met: true });
    expect(scaleGoals(1000, runs, 256, peers).operatorPeakRss!.met).toBe(false);
    expect(goals.apiRequestsPerRun).toMatchObject({ shown: '27.05', met: false });
    expect(scaleGoals(1000, phase(1, 2, 12), 1, peers).apiRequestsPerRun.met).toBe(true);
  });

  it('leaves out the goals stated at N=1000 for a smaller run, and fails a finish goal with no peer to judge it', () => {
    const small = scaleGoals(200, runs, 250.4, peers);
    expect(small.allFinishedWithinJobController).toBeUndefined();
    expect(small.operatorPeakRss).toBeUndefined();
    expect(scaleGoals(1000, runs, 250.4, { unlimited: peers.unlimited }).allFinishedWithinJobController).toMatchObject({
      shown: 'n/a',
      met: false,
    });
  });
});

describe("the garbage collector's reads of runs", () => {
  // Two lines as the control plane's audit log wrote them in a 200-run benchmark (trimmed).
  const auditLine = (userAgent: string, name: string, verb = 'get', resource = 'codingruns') =>
    JSON.stringify({
      kind: 'Event',
      level: 'Metadata',
      verb,
      requestURI: `/apis/chamvi.dev/v1alpha1/namespaces/scale-runs/${resource}/${name}`,
      userAgent,
      objectRef: { resource, namespace: 'scale-runs', name, apiGroup: 'chamvi.dev', apiVersion: 'v1alpha1' },
      responseStatus: { metadata: {}, code: 200 },
    });
  const collector = 'kube-controller-manager/v1.34.4 (linux/amd64) kubernetes/$Format/generic-garbage-collector';
  const operator = 'kubernetes-client-javascript/2.0.1';

  it("counts kube-controller-manager's garbage collector's GETs of runs only", () => {
    const log = [
      auditLine(collector, 'bench-0047'),
      auditLine(operator, 'bench-0047'),
      auditLine(collector, 'bench-0048'),
      auditLine(collector, 'bench-0049', 'list'),
      auditLine(collector, 'bench-0049', 'get', 'codingschedules'),
      '',
    ].join('\n');
    expect(garbageCollectorRunReads(log)).toBe(2);
  });

  it("moves them out of the controller's GETs, never more than the counter saw", () => {
    const delta = new Map([
      ['GET chamvi.dev/codingruns', 5],
      ['POST /pods', 3],
    ]);
    expect(moveGarbageCollectorReads(delta, 2)).toEqual(
      new Map([
        ['GET chamvi.dev/codingruns', 3],
        ['POST /pods', 3],
        [GARBAGE_COLLECTOR_RUN_READS, 2],
      ]),
    );
    expect(moveGarbageCollectorReads(delta, 9)).toEqual(
      new Map([
        ['POST /pods', 3],
        [GARBAGE_COLLECTOR_RUN_READS, 5],
      ]),
    );
    expect(moveGarbageCollectorReads(delta, 0)).toBe(delta);
  });
});
