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
//   guarded by the run's uid and phase, and the entry is written under its own key.
//
// Except when that next job is itself a running step going on, and this process is still
// sending the record before: then it does not wait. Its own record names the entry before
// (`before`) and goes out behind those writes, once they ended; if they failed, the entry
// before is sent again with it. Its progress holds the totals, so it stands for the progress
// before too. One record deep: a record whose own `before` is still on its way is waited for.
//
// Steps that change the phase (approvals, the last step, a resumed call) still write before
// they hand on (end-step.ts).
import type { CodingRun } from '../api/index.ts';
import type { TranscriptEntry } from '../record/transcript-entry.ts';
import { addedTimings } from '../reconcile/run-timings.ts';
import type { AgentDependencies } from './agent-dependencies.ts';
import { writeStepEntry } from './record-step.ts';
import type { StepProgress } from './run-status-writer.ts';
import type { RunState } from './run-state.ts';
import type { TranscriptRun } from './transcript-writer.ts';
import type { LandedMarks } from './trailing-marks.ts';

/** What a handed-on step still has to write: kept in the state until the next job settles it. */
export interface TrailingRecord {
  step: number;
  progress: StepProgress;
  entry?: TranscriptEntry;
  /** The step before's entry, when its writes were still on their way as this record was made: sent again with this one unless they landed. */
  before?: { step: number; entry?: TranscriptEntry };
}

/**
 * This process's trailing writes, by run and step. A settled entry stays until the next job
 * takes it, so that job does not send the writes again. Entries no job takes (the run ended,
 * or its next job ran on another replica) are dropped after `keepMs`.
 */
export class TrailingWrites {
  private readonly sent = new Map<string, { at: number; writes: Promise<void>; ended: boolean }>();

  constructor(
    /** Where landed records are marked for the other replicas; absent, they send a record again. */
    private readonly marks?: LandedMarks,
    private readonly now: () => number = Date.now,
    private readonly keepMs = 10 * 60_000,
  ) {}

  /**
   * Starts `send` now; its failure is the next job's to see (it sends again). It answers
   * whether the run was still Running: only then is it marked, so a run deleted meanwhile
   * (its keys removed, run-state.ts) gets no mark back.
   */
  start(uid: string, step: number, send: () => Promise<boolean>): void {
    const at = this.now();
    // Oldest first (insertion order): stop at the first one still kept, so a step costs no walk over every run.
    for (const [key, each] of this.sent) {
      if (at - each.at <= this.keepMs) break;
      this.sent.delete(key);
    }
    // A failed mark only costs the writes being sent again.
    const writes = send().then(async (running) => {
      if (running) await this.marks?.mark(uid, step).catch(() => undefined);
    });
    const kept = { at, writes, ended: false };
    const ended = () => void (kept.ended = true);
    writes.then(ended, ended);
    // Deleted first, so a record started again moves to the end and the order stays oldest first.
    this.sent.delete(`${uid}/${step}`);
    this.sent.set(`${uid}/${step}`, kept);
  }

  /**
   * This process's writes of the record while they are still on their way, taken (no later
   * job settles them): whether they landed, once they ended. Undefined when they are another
   * process's or have ended, which `landed` answers at once.
   */
  onItsWay(uid: string, step: number): Promise<boolean> | undefined {
    const key = `${uid}/${step}`;
    const kept = this.sent.get(key);
    if (!kept || kept.ended) return undefined;
    this.sent.delete(key);
    return kept.writes.then(
      () => true,
      () => false,
    );
  }

  /**
   * Whether the record's writes landed: this process's own (waited for, and taken: asked
   * again, the answer comes from the mark), or else the mark another replica left.
   */
  async landed(uid: string, step: number): Promise<boolean> {
    const key = `${uid}/${step}`;
    const kept = this.sent.get(key);
    if (!kept) return (await this.marks?.landed(uid, step)) ?? false;
    this.sent.delete(key);
    return kept.writes.then(
      () => true,
      () => false,
    );
  }

  /** On shutdown: waits up to `timeoutMs` for writes still on their way (the next job sends any that did not land). */
  async drain(timeoutMs = 5_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([Promise.allSettled([...this.sent.values()].map((each) => each.writes)), late]);
    clearTimeout(timer);
  }

  /** Records not yet taken (for tests and the process's own bound). */
  get size(): number {
    return this.sent.size;
  }
}

type RecordDeps = Pick<AgentDependencies, 'status' | 'transcript' | 'events' | 'logger' | 'metrics'>;

/**
 * The two writes of a record, side by side; whether the run was still Running. One that is
 * not (ended, deleted) is left to the next job, which reads it. Unless `beforeLanded`, the
 * entry before is written first (it may open the transcript chunk this record's entry goes into).
 */
export async function sendTrailingRecord(
  deps: RecordDeps,
  run: TranscriptRun & CodingRun,
  record: TrailingRecord,
  beforeLanded = false,
): Promise<boolean> {
  const { namespace, name, uid } = run.metadata;
  if (!beforeLanded) await writeStepEntry(deps, run, record.before?.entry);
  const [written] = await Promise.all([
    deps.status.progress(namespace, name, uid, record.progress),
    writeStepEntry(deps, run, record.entry),
  ]);
  if (written) deps.metrics.observePhases(addedTimings(run.status?.timings, written.status?.timings));
  return written !== undefined;
}

/**
 * Settles the state's trailing record, if any: waits for this process's writes (`taken`, when
 * onItsWay took them already), or sends them again. Throws when they cannot be sent (the job
 * is retried, the record still in the state).
 */
export async function settleTrailingRecord(
  deps: RecordDeps & { trailing?: TrailingWrites },
  run: TranscriptRun & CodingRun,
  state: RunState,
  taken?: Promise<boolean>,
): Promise<void> {
  const record = state.trailing;
  if (!record) return;
  const landed = (await (taken ?? deps.trailing?.landed(run.metadata.uid, record.step))) ?? false;
  if (!landed) await sendTrailingRecord(deps, run, record);
  // Only this record: a later one (the step ended meanwhile) is not this call's to settle.
  if (state.trailing === record) delete state.trailing;
}
