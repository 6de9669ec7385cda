// Memory and CPU of a process and its descendants, read from /proc while a benchmark runs:
// peak RSS (sum of VmRSS over the tree, sampled), optionally peak PSS (the same with each
// shared page split among the processes sharing it, so short-lived children such as git
// are not charged the whole of their shared libraries again), and CPU seconds (utime+stime
// of the root, plus cutime+cstime of the children it has reaped, e.g. the workers' git, plus
// the same of each descendant still alive at the last sample: the operator's process
// launcher, with the git and tar it has reaped).
import { readFileSync, readdirSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // getconf CLK_TCK on Linux

export interface ProcessUsage {
  /** Highest sampled sum of VmRSS over the process and its live descendants, in bytes. */
  peakRssBytes: number;
  /** Highest sampled RSS of the root process alone, in bytes. */
  peakRootRssBytes: number;
  /** Highest sampled sum of Pss over the tree, in bytes (when asked for). */
  peakPssBytes?: number;
  /** CPU seconds (user + system) spent between start() and stop(), reaped children and live descendants included. */
  cpuSeconds: number;
  samples: number;
}

interface CpuTicks {
  own: number;
  reapedChildren: number;
}

function readCpuTicks(pid: number): CpuTicks | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after "(comm) ": state is field 3; utime, stime, cutime, cstime are 14-17.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const at = (field: number) => Number(fields[field - 3]);
    return { own: at(14) + at(15), reapedChildren: at(16) + at(17) };
  } catch {
    return undefined;
  }
}

/** A process's own CPU ticks and those of the children it has reaped; 0 once it is gone. */
function totalTicks(pid: number): number {
  const ticks = readCpuTicks(pid);
  return ticks ? ticks.own + ticks.reapedChildren : 0;
}

/** CPU seconds the process itself has used so far (not its children); undefined once it is gone. */
export function ownCpuSeconds(pid: number): number | undefined {
  const ticks = readCpuTicks(pid);
  return ticks === undefined ? undefined : ticks.own / TICKS_PER_SECOND;
}

function readPssBytes(pid: number): number {
  try {
    const match = /^Pss:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

function readRssBytes(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** The pid and every live descendant, through /proc/<pid>/task/<tid>/children. */
export function processTree(root: number): number[] {
  const found: number[] = [];
  const pending = [root];
  while (pending.length > 0) {
    const pid = pending.pop()!;
    found.push(pid);
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      try {
        for (const child of readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(' ')) {
          if (child) pending.push(Number(child));
        }
      } catch {
        // The thread ended between the listing and the read.
      }
    }
  }
  return found;
}

export class ProcessSampler {
  private timer: NodeJS.Timeout | undefined;
  private startTicks: CpuTicks | undefined;
  private lastTicks: CpuTicks | undefined;
  private peakRssBytes = 0;
  private peakRootRssBytes = 0;
  private peakPssBytes = 0;
  private samples = 0;
  /** Each descendant's ticks at start(); one born later started from none. */
  private descendantsAtStart = new Map<number, number>();
  /** The live descendants' ticks since start(), at the last sample that saw the root. */
  private descendantTicks = 0;

  constructor(
    readonly pid: number,
    private readonly options: { intervalMs?: number; descendants?: boolean; pss?: boolean } = {},
  ) {}

  start(): void {
    this.startTicks = readCpuTicks(this.pid);
    this.lastTicks = this.startTicks;
    this.peakRssBytes = 0;
    this.peakRootRssBytes = 0;
    this.peakPssBytes = 0;
    this.samples = 0;
    this.descendantTicks = 0;
    this.descendantsAtStart = new Map(
      (this.options.descendants === false ? [] : processTree(this.pid).slice(1)).map((pid) => [pid, totalTicks(pid)]),
    );
    this.sample();
    this.timer = setInterval(() => this.sample(), this.options.intervalMs ?? 250);
    this.timer.unref();
  }

  private sample(): void {
    const pids = this.options.descendants === false ? [this.pid] : processTree(this.pid);
    const rootRss = readRssBytes(this.pid);
    const total = rootRss + pids.slice(1).reduce((sum, pid) => sum + readRssBytes(pid), 0);
    this.peakRssBytes = Math.max(this.peakRssBytes, total);
    this.peakRootRssBytes = Math.max(this.peakRootRssBytes, rootRss);
    if (this.options.pss)
      this.peakPssBytes = Math.max(
        this.peakPssBytes,
        pids.reduce((sum, pid) => sum + readPssBytes(pid), 0),
      );
    // Kept so stop() still has a figure when the process has exited in between.
    const rootTicks = readCpuTicks(this.pid);
    if (rootTicks) {
      this.lastTicks = rootTicks;
      // A descendant that dies before the next sample is counted then by whoever reaped it.
      this.descendantTicks = pids.slice(1).reduce((sum, pid) => sum + totalTicks(pid) - (this.descendantsAtStart.get(pid) ?? 0), 0);
    }
    this.samples += 1;
  }

  stop(): ProcessUsage {
    if (this.timer) clearInterval(this.timer);
    this.sample();
    const start = this.startTicks ?? { own: 0, reapedChildren: 0 };
    const end = this.lastTicks ?? start;
    const ticks = end.own + end.reapedChildren - start.own - start.reapedChildren + this.descendantTicks;
    return {
      peakRssBytes: this.peakRssBytes,
      peakRootRssBytes: this.peakRootRssBytes,
      ...(this.options.pss ? { peakPssBytes: this.peakPssBytes } : {}),
      cpuSeconds: ticks / TICKS_PER_SECOND,
      samples: this.samples,
    };
  }
}
