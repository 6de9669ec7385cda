// The leader's sweep of run states left in Redis by runs deleted while no operator ran, or
// during a leader handover: once the run cache has synced, again after the grace, then every
// ten minutes, it lists the states (workers/run-state.ts uids), asks orphanedRunStates which
// belong to no run, and stops those as the reconciler stops a run the watch reported deleted
// (run-reconciler.ts stopRunsGone): their jobs, their state and their bytes in their namespace's
// tally go. One sweep per leadership term's controller; it stops with the controller.
import { API_VERSION, KIND, type CodingRun } from '../api/index.ts';
import type { RunAgent } from '../reconcile/run-agent.ts';
import type { OperatorMetrics } from '../observability/operator-metrics.ts';
import { runLogFields } from '../observability/run-log-fields.ts';
import type { ObjectCache } from './run-reconciler.ts';
import {
  ORPHAN_GRACE_MS,
  orphanVerdict,
  orphanedRunStates,
  type OrphanSighting,
  type StateOwner,
  type StateRunRef,
} from './orphaned-run-states.ts';

/** How often the leader sweeps once the first two sweeps (at the start of its term, then after the grace) are done. */
export const ORPHAN_SWEEP_INTERVAL_MS = 10 * 60_000;

/** The run states in Redis, as the sweep reads them (workers/run-state.ts RunStateStore). */
export interface RunStateKeys {
  /** The uids that have a state now. */
  uids(): Promise<string[]>;
  /** Whose the state under `uid` is, as the state says. */
  ownerOf(uid: string): Promise<StateOwner>;
}

export interface OrphanedStateSweepLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface OrphanedStateSweepDeps {
  states: RunStateKeys;
  runs: ObjectCache<CodingRun>;
  agent: Pick<RunAgent, 'stop'>;
  /** config.watchNamespaces: a state of a run elsewhere is left (the cache cannot say whether its run exists). */
  watchNamespaces: readonly string[];
  /**
   * Whether the cache holds the runs of a namespace (run-controller.ts: it has listed). A watched
   * namespace it could not list (the operator's RoleBinding there deleted) has none in it: a
   * state of a run there is left, and looked at again by the first sweep after it has listed.
   * Absent: every namespace.
   */
  listed?: (namespace: string) => boolean;
  logger: OrphanedStateSweepLogger;
  metrics?: Pick<OperatorMetrics, 'orphanedRunStatesSwept'>;
  now?: () => number;
  graceMs?: number;
  intervalMs?: number;
}

/**
 * The run a state names, as agent.stop needs it: its identity, which is all it reads of a run
 * without a status (its state gives the steps to remove).
 */
function goneRun(ref: StateRunRef): CodingRun {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { uid: ref.uid, namespace: ref.namespace, name: ref.name },
    spec: {} as CodingRun['spec'],
  };
}

export class OrphanedStateSweep {
  private sightings: ReadonlyMap<string, OrphanSighting> = new Map();
  /**
   * The namespace of each due state left because its namespace had not listed: not read again
   * (up to 24 MiB) at each sweep while it still has not; read once more when it has.
   */
  private readonly unlistedOwners = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private sweeps = 0;
  private stopped = false;
  private readonly now: () => number;
  private readonly graceMs: number;
  private readonly intervalMs: number;

  constructor(private readonly deps: OrphanedStateSweepDeps) {
    this.now = deps.now ?? Date.now;
    this.graceMs = deps.graceMs ?? ORPHAN_GRACE_MS;
    this.intervalMs = deps.intervalMs ?? ORPHAN_SWEEP_INTERVAL_MS;
  }

  /** Sweeps now (the caches have synced), then after the grace, then every interval, until stop(). */
  start(): void {
    if (this.stopped || this.timer || this.running) return;
    this.next(0);
  }

  /** No sweep starts after this, and the one under way stops no more runs. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Resolves once no sweep is under way. */
  async settled(): Promise<void> {
    while (this.running) await this.running;
  }

  private next(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.sweep()
        .then(() => undefined)
        .catch((error: unknown) =>
          this.deps.logger.warn(
            { err: error instanceof Error ? error.message : String(error) },
            'sweep of run states left in Redis failed; tried again at the next',
          ),
        )
        .finally(() => {
          this.running = undefined;
          // The second sweep comes after the grace: a state left by a run deleted during the
          // outage goes within a minute or two of the term's start, not ten.
          if (!this.stopped) this.next(this.sweeps === 1 ? this.graceMs : this.intervalMs);
        });
    }, ms);
    this.timer.unref();
  }

  /**
   * One sweep: lists the states, then the cache's runs (a run created meanwhile is in it), and
   * stops the runs of those found without a run by a sweep at least the grace ago. Resolves to
   * the uids stopped. A stop that fails ends the sweep (Redis is away); the next tries again.
   */
  async sweep(): Promise<string[]> {
    this.sweeps++;
    const { states, runs, agent, logger } = this.deps;
    const stateUids = await states.uids();
    const runUids = new Set(runs.list().map((run) => run.metadata.uid));
    const { due, sightings } = orphanedRunStates({ stateUids, runUids, sightings: this.sightings, now: this.now(), graceMs: this.graceMs });
    this.sightings = sightings;
    for (const uid of this.unlistedOwners.keys()) if (!sightings.has(uid)) this.unlistedOwners.delete(uid);
    const listed = this.deps.listed ?? (() => true);
    const stopped: string[] = [];
    for (const uid of due) {
      if (this.stopped) break;
      const namespace = this.unlistedOwners.get(uid);
      if (namespace !== undefined && !listed(namespace)) continue;
      this.unlistedOwners.delete(uid);
      const verdict = orphanVerdict(await states.ownerOf(uid), this.deps.watchNamespaces);
      if ('leave' in verdict) {
        if (verdict.leave === 'gone') continue;
        // Looked at once per term: its state stays, and reading it again (up to 24 MiB) would say the same.
        sightings.get(uid)!.leftAlone = true;
        if (verdict.leave === 'unreadable')
          logger.warn(
            { uid, problem: verdict.problem },
            'a run state in Redis belongs to no run and cannot be read (sealed with another stateKey?); left as it is',
          );
        continue;
      }
      const run = goneRun(verdict.stop);
      if (!listed(run.metadata.namespace)) {
        this.unlistedOwners.set(uid, run.metadata.namespace);
        continue;
      }
      // The cache again, by the name the state gives: a run created since the listing is not stopped.
      if (runs.get(run.metadata.namespace, run.metadata.name)?.metadata.uid === uid) continue;
      const jobsRunning = await agent.stop(run);
      stopped.push(uid);
      this.deps.metrics?.orphanedRunStatesSwept.inc();
      logger.info(
        { ...runLogFields(run), jobsRunning },
        jobsRunning > 0
          ? `stopped the agent of a run deleted while no operator watched it; ${jobsRunning} of its jobs still run, and the next sweep stops what they leave`
          : 'stopped the agent of a run deleted while no operator watched it: its state in Redis and its bytes in the namespace tally are gone',
      );
    }
    return stopped;
  }
}
