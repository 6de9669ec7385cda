// A running step's record trails the hand-over (#17.5). The record is the step's status
// progress and its transcript entry. When a step of a Running run goes on to another step,
// its state names the record (RunState.trailing) and is saved, the next job is queued, and
// this process sends the two writes at once. So they overlap the next job's model call,
// and they land one API round trip after the step, however long the queue holds the next job.
//
// The next job settles the record before it writes anything of its own:
// - the writes are this process's: it waits for them (usually long landed);
// - they are another replica's: it reads their mark in Redis (trailing-marks.ts);
// - neither says they landed (the process died after the save, or they failed): it sends
//   them again. Both writes can be sent twice safely: the progress is absolute totals,
//   guarded by the run's uid and phase, and the entries are written under their own keys.
//
// Except when that next job is itself a running step going on, and this process is still
// sending the record before (the steps come faster than the API server takes their writes):
// then it does not wait. Its record carries the entries still on their way (`earlier`) and
// waits behind the writes on their way; a record already waiting there is taken over (its
// entries are among `earlier`, and the newer progress holds its totals). So a run has at most
// one record's writes on their way and one record waiting, and when the API server is slower
// than the steps, one write carries several steps. Once the writes ahead end, the waiting
// record writes its progress and the entries not known to have landed. At most
// MAX_EARLIER_ENTRIES: past that, the step waits for the writes ahead, as any other does.
//
// Steps that change the phase (approvals, the last step, a resumed call) still write before
// they hand on (end-step.ts).
import type { CodingRun } from '../api/index.ts';
import type { TranscriptEntry } from '../record/transcript-entry.ts';
import { addedTimings } from '../reconcile/run-timings.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import { writeStepEntries } from './record-step.ts';
import type { StepProgress } from './run-status-writer.ts';
import type { RunState } from './run-state.ts';
import type { TranscriptRun } from './transcript-writer.ts';
import type { LandedMarks } from './trailing-marks.ts';

export { MAX_EARLIER_ENTRIES } from './run-state-schema.ts';

/** What a handed-on step still has to write: kept in the state until the next job settles it. */
export interface TrailingRecord {
  step: number;
  progress: StepProgress;
  entry?: TranscriptEntry;
  /** Entries of earlier steps whose writes were still on their way when this record was made, oldest first: written with it unless they landed. */
  earlier?: TranscriptEntry[];
}

/** Every entry the record carries, oldest first. */
export const recordEntries = (record: TrailingRecord): TranscriptEntry[] => [
  ...(record.earlier ?? []),
  ...(record.entry ? [record.entry] : []),
];

/** A record this process sends: on its way, or waiting behind the one that is. */
interface Queued {
  step: number;
  /** The keys of its entries. */
  keys: readonly string[];
  /** Sends it, writing only the entries not in `landed`; whether the run was still Running. */
  send(landed: ReadonlySet<string>): Promise<boolean>;
  /** Whether its writes landed (those of a newer record that took it over, once taken). */
  done: Promise<boolean>;
  settle(landed: boolean): void;
}

/** One run's records in this process. */
interface RunWrites {
  at: number;
  /** The record the run's state names. */
  newest: Queued;
  onItsWay?: Queued;
  waiting?: Queued;
  /** Entry keys this process saw land for the run. */
  landed: Set<string>;
}

/**
 * This process's trailing writes, by run. A run's newest record stays until the next job takes
 * it, so that job does not send the writes again. Records no job takes (the run ended, or its
 * next job ran on another replica) are dropped after `keepMs`.
 */
export class TrailingWrites {
  private readonly runs = new Map<string, RunWrites>();

  constructor(
    /** Where landed records are marked for the other replicas; absent, they send a record again. */
    private readonly marks?: LandedMarks,
    private readonly now: () => number = Date.now,
    private readonly keepMs = 10 * 60_000,
  ) {}

  /**
   * Starts `send` now, or once the run's writes on their way have ended (taking over a record
   * waiting there). Its failure is the next job's to see (it sends again). `send` answers
   * whether the run was still Running: only then is the record marked, so a run deleted
   * meanwhile (its keys removed, run-state.ts) gets no mark back.
   */
  start(uid: string, step: number, send: (landed: ReadonlySet<string>) => Promise<boolean>, keys: readonly string[] = []): void {
    const at = this.now();
    // Oldest first (insertion order): stop at the first one still kept, so a step costs no walk over every run.
    for (const [key, each] of this.runs) {
      if (at - each.at <= this.keepMs) break;
      this.runs.delete(key);
    }
    let settle!: (landed: boolean) => void;
    const done = new Promise<boolean>((resolve) => (settle = resolve));
    const queued: Queued = { step, keys, send, done, settle };
    const run = this.runs.get(uid);
    // Deleted first, so a run moves to the end and the order stays oldest first.
    this.runs.delete(uid);
    if (!run?.onItsWay) {
      const fresh: RunWrites = { at, newest: queued, landed: run?.landed ?? new Set() };
      this.runs.set(uid, fresh);
      this.send(uid, fresh, queued);
      return;
    }
    // The record waiting is taken over: the new one carries its entries and newer totals.
    if (run.waiting) void done.then(run.waiting.settle);
    run.waiting = queued;
    run.newest = queued;
    run.at = at;
    this.runs.set(uid, run);
  }

  private send(uid: string, run: RunWrites, queued: Queued): void {
    run.onItsWay = queued;
    void queued
      .send(new Set(run.landed))
      .then(async (running) => {
        for (const key of queued.keys) run.landed.add(key);
        // A failed mark only costs the writes being sent again.
        if (running) await this.marks?.mark(uid, queued.step).catch(() => undefined);
        return true;
      })
      .catch(() => false)
      .then((landed) => {
        queued.settle(landed);
        run.onItsWay = undefined;
        const next = run.waiting;
        run.waiting = undefined;
        if (next) this.send(uid, run, next);
      });
  }

  /**
   * Whether this process is still sending the run's record of `step` (on its way, or waiting
   * behind writes that are), so that the next record may go out behind it.
   */
  onItsWay(uid: string, step: number): boolean {
    const run = this.runs.get(uid);
    return run !== undefined && run.newest.step === step && run.onItsWay !== undefined;
  }

  /**
   * Whether the record's writes landed: this process's own (waited for, and taken: asked
   * again, the answer comes from the mark), or else the mark another replica left.
   */
  async landed(uid: string, step: number): Promise<boolean> {
    const run = this.runs.get(uid);
    if (!run || run.newest.step !== step) return (await this.marks?.landed(uid, step)) ?? false;
    this.runs.delete(uid);
    return run.newest.done;
  }

  /** On shutdown: waits up to `timeoutMs` for writes still on their way (the next job sends any that did not land). */
  async drain(timeoutMs = 5_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([Promise.all([...this.runs.values()].map((run) => run.newest.done)), late]);
    clearTimeout(timer);
  }

  /** Runs whose newest record is not yet taken (for tests and the process's own bound). */
  get size(): number {
    return this.runs.size;
  }
}

type RecordDeps = Pick<AgentDependencies, 'status' | 'transcript' | 'events' | 'logger' | 'metrics'>;

/**
 * The record's writes, side by side: its progress, and its entries not in `landed` (one
 * request per transcript chunk); whether the run was still Running. One that is not (ended,
 * deleted) is left to the next job, which reads it.
 */
export async function sendTrailingRecord(
  deps: RecordDeps,
  run: TranscriptRun & CodingRun,
  record: TrailingRecord,
  landed: ReadonlySet<string> = new Set(),
): Promise<boolean> {
  const { namespace, name, uid } = run.metadata;
  const [written] = await Promise.all([
    deps.status.progress(namespace, name, uid, record.progress),
    writeStepEntries(
      deps,
      run,
      recordEntries(record).filter((entry) => !landed.has(entry.key)),
    ),
  ]);
  if (written) deps.metrics.observePhases(addedTimings(run.status?.timings, written.status?.timings));
  return written !== undefined;
}

/**
 * Settles the state's trailing record, if any: waits for this process's writes, or sends them
 * again. Throws when they cannot be sent (the job is retried, the record still in the state).
 */
export async function settleTrailingRecord(
  deps: RecordDeps & { trailing?: TrailingWrites },
  run: TranscriptRun & CodingRun,
  state: RunState,
): Promise<void> {
  const record = state.trailing;
  if (!record) return;
  const landed = (await deps.trailing?.landed(run.metadata.uid, record.step)) ?? false;
  if (!landed) await sendTrailingRecord(deps, run, record);
  // Only this record: a later one (the step ended meanwhile) is not this call's to settle.
  if (state.trailing === record) delete state.trailing;
}
