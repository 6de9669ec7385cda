// When the controller last saw a started run's agent moving, so it need not look again at once.
//
// The controller looks at what the agent holds of a started run (agent-inspector.ts) whenever
// it reconciles it, and every status write a step made was a reconcile: with fast steps that
// was, per step, two reads of the whole sealed state, its decoding, nine job lookups and the
// list of active jobs, on the leader, which runs steps too (#17.5, docs/benchmarks.md). A run
// seen moving less than SIGHTING_MS ago is taken as still moving without looking. (A step's
// progress write no longer wakes its run at all, controller/run-change-wakes.ts; the writes
// that change a phase still do.)
//
// Why the safety net keeps its promise (README: a Redis that restarts empty fails the runs in
// flight within about 15 s): rechecks come every AGENT_RECHECK_MS whatever else reconciles the
// run (work-queue.ts: an earlier pending delay wins), and a loss after the last look is seen at
// the first recheck at least SIGHTING_MS after that look: at most AGENT_RECHECK_MS + SIGHTING_MS
// after the loss. Only a run seen moving is remembered; anything else is looked at every time.
import type { AgentView } from '../reconcile/observed-run.ts';

export const SIGHTING_MS = 1_000;

export class AgentSightings {
  /** By run uid, oldest sighting first (a new sighting moves its run to the end). */
  private readonly seen = new Map<string, { at: number; view: AgentView }>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly windowMs = SIGHTING_MS,
  ) {}

  /** What was seen of the run, if it was seen moving less than the window ago. */
  recent(uid: string): AgentView | undefined {
    const sighting = this.seen.get(uid);
    return sighting && this.now() - sighting.at < this.windowMs ? sighting.view : undefined;
  }

  /** What a look found: remembered if the run was moving, else any earlier sighting is forgotten. */
  note(uid: string, view: AgentView | undefined): void {
    this.seen.delete(uid);
    const now = this.now();
    if (view?.moving) this.seen.set(uid, { at: now, view });
    // Sightings are kept in time order: the expired ones are at the front.
    for (const [key, sighting] of this.seen) {
      if (now - sighting.at < this.windowMs) break;
      this.seen.delete(key);
    }
  }

  /** Runs remembered (those seen moving within the window, at most). */
  get size(): number {
    return this.seen.size;
  }
}
