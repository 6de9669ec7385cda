// status.timings: how long each phase of a run took. Pure: the controller and the workers
// measure where the phase happens and fold the entries into a status write the run makes
// anyway (the Running transition, a step's progress patch, the terminal write), so timing a
// run costs no API request. An entry once written is never changed: a job redone after a
// crash measures again, and the first measurement stands.
import { TIMING_PHASES, type RunTiming, type TimingPhase } from '../api/index.ts';

const ORDER = new Map<TimingPhase, number>(TIMING_PHASES.map((phase, index) => [phase, index]));

/** One timed phase from its start and end (epoch ms or Date); a clock that went backwards counts as 0 ms. */
export function timing(phase: TimingPhase, start: Date | number, end: Date | number): RunTiming {
  const startMs = typeof start === 'number' ? start : start.getTime();
  const endMs = typeof end === 'number' ? end : end.getTime();
  return { phase, start: new Date(startMs).toISOString(), durationMs: Math.max(0, Math.round(endMs - startMs)) };
}

/** The entries of both, the existing one winning for a phase in both, in the order a run goes through its phases. */
export function mergeTimings(existing: readonly RunTiming[] | undefined, added: readonly RunTiming[] | undefined): RunTiming[] {
  const byPhase = new Map<TimingPhase, RunTiming>();
  for (const entry of [...(existing ?? []), ...(added ?? [])]) if (!byPhase.has(entry.phase)) byPhase.set(entry.phase, entry);
  return [...byPhase.values()].sort((a, b) => ORDER.get(a.phase)! - ORDER.get(b.phase)!);
}

/** The entries of `after` that `before` does not have: what a status write added, for the histogram. */
export function addedTimings(before: readonly RunTiming[] | undefined, after: readonly RunTiming[] | undefined): RunTiming[] {
  const had = new Set((before ?? []).map((entry) => entry.phase));
  return (after ?? []).filter((entry) => !had.has(entry.phase));
}

/** Whether `added` holds a phase `existing` lacks (only then is a write worth its bytes). */
export function hasNewTimings(existing: readonly RunTiming[] | undefined, added: readonly RunTiming[] | undefined): boolean {
  return addedTimings(existing, added).length > 0;
}

/** What the controller knows when a run's fresh sandbox pod turns Ready. */
export interface SandboxStartTimes {
  /** metadata.creationTimestamp (whole seconds). */
  createdAt?: string | undefined;
  /** status.startTime: when the run was admitted and its pod created. */
  admittedAt?: string | undefined;
  /** When the pod was seen bound to a node; undefined when never seen Pending-but-bound. */
  scheduledAt?: string | undefined;
  /** Now: the pod is seen Ready. */
  readyAt: Date;
}

/**
 * Queued (created → admitted), PodScheduled (admitted → bound) and PodReady (bound → Ready),
 * each only when its start is known; every time is held inside [created, ready], so the
 * three add up to the time from creation to Ready.
 */
export function sandboxTimings(times: SandboxStartTimes): RunTiming[] {
  const ready = times.readyAt.getTime();
  const parse = (value: string | undefined) => (value === undefined || Number.isNaN(Date.parse(value)) ? undefined : Date.parse(value));
  const created = parse(times.createdAt);
  const admitted = clamp(parse(times.admittedAt), created, ready);
  const scheduled = clamp(parse(times.scheduledAt), admitted ?? created, ready);
  const entries: RunTiming[] = [];
  if (created !== undefined && admitted !== undefined) entries.push(timing('Queued', created, admitted));
  if (admitted !== undefined && scheduled !== undefined) entries.push(timing('PodScheduled', admitted, scheduled));
  const readyFrom = scheduled ?? admitted;
  if (readyFrom !== undefined) entries.push(timing('PodReady', readyFrom, ready));
  return entries;
}

/** Queued (created → admitted) and SandboxClaimed (admitted → a warm pod claimed), for a run given a pool pod. */
export function claimTimings(createdAt: string | undefined, admittedAt: string | undefined, claimedAt: Date): RunTiming[] {
  const entries: RunTiming[] = [];
  const created = createdAt === undefined ? NaN : Date.parse(createdAt);
  const admitted = admittedAt === undefined ? NaN : Date.parse(admittedAt);
  if (!Number.isNaN(created) && !Number.isNaN(admitted)) entries.push(timing('Queued', created, Math.max(created, admitted)));
  if (!Number.isNaN(admitted)) entries.push(timing('SandboxClaimed', admitted, claimedAt));
  return entries;
}

function clamp(value: number | undefined, low: number | undefined, high: number): number | undefined {
  if (value === undefined) return undefined;
  return Math.min(high, Math.max(low ?? value, value));
}
