// The scale benchmark's goals (issue #17.5), judged once from one run's figures: scale-bench.ts
// stores them in results/scale.json and prints them, bench-report.ts puts each beside its figure.
// The finish-time goal's peer is the Job controller as kube-controller-manager runs it, at its
// default client limits (QPS 20, burst 30): the 299 s the issue measured against. Without a
// limit it finishes empty pods in seconds, a bound on the API server, not a peer for runs that
// clone, exec and call a model (docs/benchmarks.md).

/** What of a phase the goals read (scale-bench.ts's PhaseResult has it). */
export interface GoalPhase {
  allPodsMs: number | null;
  allDoneMs: number | null;
  apiRequests: { controllerPerObject: number };
}

export interface ScaleGoal {
  goal: string;
  /** The figure as the goal compares it, with its unit ("0.92x", "250.4 MiB"). */
  shown: string;
  met: boolean;
}

export interface ScaleGoals {
  /** Every sandbox pod exists no later than the Job controller's last pod (the peer at the operator's limits: none). */
  podsNoSlowerThanJobController: ScaleGoal;
  /** Goals stated at N=1000 only: absent for a smaller run. */
  allFinishedWithinJobController?: ScaleGoal;
  operatorPeakRss?: ScaleGoal;
  apiRequestsPerRun: ScaleGoal;
}

export const FINISH_RATIO_GOAL = 1.1;
export const OPERATOR_RSS_GOAL_MIB = 256;
export const API_REQUESTS_PER_RUN_GOAL = 12;

// Shown rounded; judged on the ratio itself, so 1.104x is not taken for 1.10x.
const times = (value: number | null) => (value === null ? 'n/a' : `${Math.round(value * 100) / 100}x`);
const ratio = (ours: number | null, theirs: number | null | undefined) => (ours === null || !theirs ? null : ours / theirs);

export function scaleGoals(
  n: number,
  runs: GoalPhase,
  operatorAlonePeakRssMiB: number | undefined,
  /** The Job controller without a client limit, and at its defaults; either may not have run. */
  peers: { unlimited?: GoalPhase; atDefaults?: GoalPhase },
): ScaleGoals {
  const podPeer = peers.unlimited ?? peers.atDefaults;
  const podsOurs = runs.allPodsMs;
  const podsTheirs = podPeer?.allPodsMs ?? null;
  const finish = ratio(runs.allDoneMs, peers.atDefaults?.allDoneMs);
  const requests = runs.apiRequests.controllerPerObject;
  const atScale = n >= 1000;
  return {
    podsNoSlowerThanJobController: {
      goal: 'every sandbox pod exists no later than the Job controller has its pods',
      shown: times(ratio(podsOurs, podsTheirs)),
      met: podsOurs !== null && podsTheirs !== null && podsOurs <= podsTheirs,
    },
    ...(atScale
      ? {
          allFinishedWithinJobController: {
            goal: `every run finished within ${FINISH_RATIO_GOAL}x of the Job controller at its default limits`,
            shown: times(finish),
            met: finish !== null && finish <= FINISH_RATIO_GOAL,
          },
          operatorPeakRss: {
            goal: `operator process peak RSS < ${OPERATOR_RSS_GOAL_MIB} MiB at N=1000`,
            shown: operatorAlonePeakRssMiB === undefined ? 'n/a' : `${operatorAlonePeakRssMiB} MiB`,
            met: operatorAlonePeakRssMiB !== undefined && operatorAlonePeakRssMiB < OPERATOR_RSS_GOAL_MIB,
          },
        }
      : {}),
    apiRequestsPerRun: {
      goal: `at most ${API_REQUESTS_PER_RUN_GOAL} API requests per finished 3-step run`,
      shown: String(requests),
      met: requests <= API_REQUESTS_PER_RUN_GOAL,
    },
  };
}

/** One line per goal, for a benchmark's own output. */
export function goalLines(goals: ScaleGoals): string[] {
  return Object.values(goals).map((each: ScaleGoal) => `goal: ${each.goal}: ${each.shown}, ${each.met ? 'met' : 'not met'}`);
}
