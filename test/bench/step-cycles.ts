// The step benchmark's arithmetic: a step's overhead is the time from its job's pickup to the
// next job's pickup (the next step, or finalize after the last) less the model call and the
// tool calls. It so contains everything the run pays per step that is neither: the dispatch
// of the job, loading and unsealing the run state from Redis, the live run read, the state
// saves, the status write, the enqueue of the next job and its hand-over through BullMQ.
//
// Pickup times are the "active" entries of BullMQ's event stream (Redis's clock, ms, written
// as a worker claims the job); a step's end is the operator's "step done" log line (the same
// machine's clock, ms), which also gives its model and tool time (performance.now, sub-ms).
// Nothing is added to the product.

/** What the operator logs as "step done" (`time` parsed from its ISO time to ms since the epoch; `step` 1-based). */
export interface StepDoneLine {
  step: number;
  time: number;
  /** From just after the state load to just after the next job was enqueued. */
  totalMs: number;
  modelMs: number;
  toolsMs: number;
}

export interface StepCycle {
  step: number;
  /** Pickup of this step's job to pickup of the next job. */
  cycleMs: number;
  /** cycleMs less the model and the tools: what the benchmark calls step overhead. */
  overheadMs: number;
  /** Pickup to the step's own clock starting: the job's dispatch and the run-state load. */
  pickupToStartMs: number;
  /** Inside the step, outside model and tools: live run read, saves, status write, enqueue. */
  inStepMs: number;
  /** The "step done" line to the next job's pickup: the hand-over through BullMQ (may be ~0 or below when an idle worker slot claimed the next job before the enqueue's reply came back). */
  handOverMs: number;
  modelMs: number;
  toolsMs: number;
}

/**
 * One cycle per step whose own pickup and next pickup are known. `pickups` maps a step
 * number (1-based) to its job's pickup; `pickups.get(last + 1)` is the finalize job's.
 */
export function stepCycles(pickups: ReadonlyMap<number, number>, lines: readonly StepDoneLine[]): StepCycle[] {
  const cycles: StepCycle[] = [];
  for (const line of [...lines].sort((a, b) => a.step - b.step)) {
    const pickedUp = pickups.get(line.step);
    const next = pickups.get(line.step + 1);
    if (pickedUp === undefined || next === undefined) continue;
    const cycleMs = next - pickedUp;
    const startedAt = line.time - line.totalMs;
    cycles.push({
      step: line.step,
      cycleMs,
      overheadMs: cycleMs - line.modelMs - line.toolsMs,
      pickupToStartMs: startedAt - pickedUp,
      inStepMs: line.totalMs - line.modelMs - line.toolsMs,
      handOverMs: next - line.time,
      modelMs: line.modelMs,
      toolsMs: line.toolsMs,
    });
  }
  return cycles;
}

/** #17.5: a step's overhead under 10 ms at the median. */
export const STEP_OVERHEAD_GOAL_MS = 10;

/** The goal, said, and whether a run's overhead p50 meets it (strictly under). */
export function stepOverheadGoal(overheadP50Ms: number): { goal: string; met: boolean } {
  return { goal: `overhead p50 < ${STEP_OVERHEAD_GOAL_MS} ms (#17.5)`, met: overheadP50Ms < STEP_OVERHEAD_GOAL_MS };
}

/** The run whose overhead p50 is the median of the runs' (for an even count, the lower of the middle two). */
export function medianRun<T extends { overheadMs: { p50: number } }>(runs: readonly T[]): T {
  if (runs.length === 0) throw new Error('no step bench run to take the median of');
  return [...runs].sort((a, b) => a.overheadMs.p50 - b.overheadMs.p50)[Math.floor((runs.length - 1) / 2)]!;
}
