// The operator's resident memory, read from /proc: one reading, or a sampler that keeps
// the peak between laps, for tests that bound what the operator holds.
import { readFileSync } from 'node:fs';

export const MiB = 1024 * 1024;

/** Resident memory of a process in bytes (VmRSS), and its peak so far (VmHWM). */
export function residentMemory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
}

export interface MemorySampler {
  /** The largest VmRSS sample since the last lap (or the start), and starts a new lap. */
  lap(): number;
  /** Stops sampling: the largest sample overall, the kernel's VmHWM, and how many samples were taken. */
  stop(): { sampledPeak: number; highWaterMark: number; samples: number };
}

/** Samples a process's VmRSS every `intervalMs` until stopped. */
export function sampleMemory(pid: number, intervalMs = 100): MemorySampler {
  let sampledPeak = 0;
  let lapPeak = 0;
  let highWaterMark = 0;
  let samples = 0;
  const take = () => {
    try {
      const { rss, peak } = residentMemory(pid);
      sampledPeak = Math.max(sampledPeak, rss);
      lapPeak = Math.max(lapPeak, rss);
      highWaterMark = Math.max(highWaterMark, peak);
      samples += 1;
    } catch {
      // the process is gone
    }
  };
  take();
  const timer = setInterval(take, intervalMs);
  return {
    lap() {
      take();
      const peak = lapPeak;
      lapPeak = 0;
      return peak;
    },
    stop() {
      clearInterval(timer);
      take();
      return { sampledPeak, highWaterMark, samples };
    },
  };
}
