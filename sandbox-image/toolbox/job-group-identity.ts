// Whether a background job's pid still names the job's process group, so that the group may be
// signalled or counted. Linux frees a pid for reuse once no process has it as its pid, group id
// or session id; the job's pid is all three for its wrapper, and the session id of its watchdog.
// The watchdog's `group-ended` says the group is gone, but it can be missing after the group is
// (the watchdog killed with everything else, `kill -9 -1`; the clean shell's stop giving up; a
// home that survived a restart), and then the pid may be another job's or command's group. A pid
// alone cannot tell, so the job records when its wrapper started (`pid-start`, by the toolbox) and
// its watchdog (`watchdog`: pid and start, by the wrapper, bash-script.ts). The pid is the job's
// while the process at it is the wrapper (same start time, still leading its group and session),
// or, once the wrapper exited (its command did, and left something running), while the watchdog
// lives in the job's session: either holds the id, so it was never free. With neither, the group
// is not the job's to signal; a writer of its log is still found by the open file (bash-jobs.ts).
import { processEntryOf } from './process-table.ts';

/** A process as recorded when it was started: its pid and its start time in clock ticks since boot. */
export interface RecordedProcess {
  pid: number;
  startTicks: number;
}

/** A process as /proc/PID/stat shows it now: its group, session (field 6) and start time. */
export interface ProcessIdentity {
  pgid: number;
  session: number;
  startTicks: number;
}

/** What the job recorded and what /proc shows now at those pids; `procReadable` false: not Linux. */
export interface JobGroupObservation {
  pgid: number;
  leaderStartTicks: number | undefined;
  watchdog: RecordedProcess | undefined;
  /** The process now at the job's pid (its wrapper, or whatever got the pid since). */
  leaderNow: ProcessIdentity | undefined;
  watchdogNow: ProcessIdentity | undefined;
  procReadable: boolean;
}

/** The decision (see the header): true when the job's pid still names the job's group. */
export function isJobsGroup(observed: JobGroupObservation): boolean {
  // Without /proc nothing can be told apart: a pid and kill -0 are all there is.
  if (!observed.procReadable) return true;
  const { pgid, leaderNow, watchdog, watchdogNow } = observed;
  if (leaderNow) {
    return (
      observed.leaderStartTicks !== undefined &&
      leaderNow.startTicks === observed.leaderStartTicks &&
      leaderNow.pgid === pgid &&
      leaderNow.session === pgid
    );
  }
  return (
    watchdog !== undefined && watchdogNow !== undefined && watchdogNow.startTicks === watchdog.startTicks && watchdogNow.session === pgid
  );
}

/** Reads what isJobsGroup decides on; the recorded values come from the job's files. */
export function observeJobGroup(
  pgid: number,
  leaderStartTicks: number | undefined,
  watchdog: RecordedProcess | undefined,
): JobGroupObservation {
  return {
    pgid,
    leaderStartTicks,
    watchdog,
    leaderNow: processIdentityOf(pgid),
    watchdogNow: watchdog ? processIdentityOf(watchdog.pid) : undefined,
    procReadable: processIdentityOf(process.pid) !== undefined,
  };
}

/** The process at `pid` now, read synchronously (one read of /proc); undefined when none is there. */
export function processIdentityOf(pid: number): ProcessIdentity | undefined {
  const entry = processEntryOf(pid);
  return entry && { pgid: entry.pgid, session: entry.session, startTicks: entry.startTicks };
}

/** A `watchdog` file's `PID START`; undefined for anything else (code in the sandbox can write it). */
export function parseRecordedProcess(text: string | undefined): RecordedProcess | undefined {
  const match = /^([0-9]+) ([0-9]+)\s*$/.exec(text ?? '');
  if (!match) return undefined;
  const pid = Number(match[1]);
  const startTicks = Number(match[2]);
  return Number.isSafeInteger(pid) && pid > 1 && Number.isSafeInteger(startTicks) ? { pid, startTicks } : undefined;
}
