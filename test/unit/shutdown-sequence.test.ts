// The operator's stop on SIGTERM (shutdown-sequence.ts): the workers stop taking jobs before
// anything else, the lease is handed over beside the steps in flight, those steps are waited
// for until the deadline that follows the pod's grace period, and the rest closes only after.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import type { Logger } from '../../operator/src/observability/logger.ts';
import { shutDown, shutdownTimings, type ShutdownParts } from '../../operator/src/shutdown-sequence.ts';

/** A promise and the function that settles it, for a part that ends when the test says. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

interface Recorded {
  parts: ShutdownParts;
  /** Each part's call, with the fake clock's ms since the signal. */
  calls: string[];
  jobs: ReturnType<typeof gate>;
  reconciles: ReturnType<typeof gate>;
}

function recordedParts(): Recorded {
  const calls: string[] = [];
  const jobs = gate();
  const reconciles = gate();
  const at = (name: string) => calls.push(`${name}@${Date.now()}`);
  return {
    calls,
    jobs,
    reconciles,
    parts: {
      stopTakingJobs: () => {
        at('stopTakingJobs');
        return jobs.promise;
      },
      stopReconciling: () => {
        at('stopReconciling');
        return reconciles.promise;
      },
      releaseLease: async () => {
        at('releaseLease');
      },
      closeRest: async () => {
        at('closeRest');
      },
    },
  };
}

const warnings: string[] = [];
const logger = {
  info: () => undefined,
  warn: (_fields: object, message: string) => warnings.push(message),
  error: () => undefined,
  fatal: () => undefined,
  child: () => logger,
} as unknown as Logger;

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
  warnings.length = 0;
});
afterEach(() => vi.useRealTimers());

describe('shutDown', () => {
  it('stops the workers taking jobs before it calls anything else, at the signal', () => {
    const { parts, calls } = recordedParts();
    void shutDown(parts, shutdownTimings(85_000), logger);
    expect(calls[0]).toBe('stopTakingJobs@0');
  });

  it('hands the lease over once the reconciles end, without waiting for the steps in flight', async () => {
    const { parts, calls, reconciles } = recordedParts();
    void shutDown(parts, shutdownTimings(85_000), logger);
    await vi.advanceTimersByTimeAsync(1_200);
    reconciles.open();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toEqual(['stopTakingJobs@0', 'stopReconciling@0', 'releaseLease@1200']);
  });

  it('hands the lease over after 5 s when a reconcile does not end', async () => {
    const { parts, calls } = recordedParts();
    void shutDown(parts, shutdownTimings(85_000), logger);
    await vi.advanceTimersByTimeAsync(4_999);
    expect(calls).not.toContain('releaseLease@4999');
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toContain('releaseLease@5000');
  });

  it('waits for the steps in flight, however long, within the deadline, and closes the rest only after them', async () => {
    const { parts, calls, jobs, reconciles } = recordedParts();
    reconciles.open();
    let done: { jobsEnded: boolean } | undefined;
    void shutDown(parts, shutdownTimings(85_000), logger).then((outcome) => (done = outcome));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls.some((call) => call.startsWith('closeRest'))).toBe(false);
    expect(done).toBeUndefined();
    jobs.open();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.at(-1)).toBe('closeRest@60000');
    expect(done).toEqual({ jobsEnded: true });
  });

  it('gives up on the steps at the deadline, says so, and leaves Redis open under them', async () => {
    const { parts, calls, reconciles } = recordedParts();
    reconciles.open();
    let done: { jobsEnded: boolean } | undefined;
    void shutDown(parts, shutdownTimings(85_000), logger).then((outcome) => (done = outcome));
    await vi.advanceTimersByTimeAsync(81_999);
    expect(done).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toEqual({ jobsEnded: false });
    expect(calls.some((call) => call.startsWith('closeRest'))).toBe(false);
    expect(warnings).toEqual([expect.stringContaining('jobs still running at the shutdown deadline')]);
  });

  it('still lets the steps finish when the lease cannot be handed over', async () => {
    const { parts, calls, jobs, reconciles } = recordedParts();
    reconciles.open();
    parts.releaseLease = () => Promise.reject(new Error('API server gone'));
    void shutDown(parts, shutdownTimings(85_000), logger);
    await vi.advanceTimersByTimeAsync(10_000);
    jobs.open();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.at(-1)).toBe('closeRest@10000');
    expect(warnings).toEqual([expect.stringContaining('could not hand the leader lease over')]);
  });
});

describe('shutdownTimings', () => {
  it("exits at the limit, the jobs' wait ending 3 s before it so the rest can close", () => {
    expect(shutdownTimings(85_000)).toEqual({ reconcilesMs: 5_000, jobsMs: 82_000, exitMs: 85_000 });
  });

  it('gives the jobs half of a limit too short for that', () => {
    expect(shutdownTimings(4_000)).toEqual({ reconcilesMs: 4_000, jobsMs: 2_000, exitMs: 4_000 });
  });
});

describe('the shutdown limit in the config', () => {
  it("is 25 s unless set: within Kubernetes' default grace period of 30 s", () => {
    expect(loadOperatorConfig({}, {}).shutdownTimeoutSeconds).toBe(25);
  });

  it('comes from CHAMVI_SHUTDOWN_TIMEOUT_SECONDS, which the chart sets from terminationGracePeriodSeconds', () => {
    expect(loadOperatorConfig({}, { CHAMVI_SHUTDOWN_TIMEOUT_SECONDS: '85' }).shutdownTimeoutSeconds).toBe(85);
    expect(() => loadOperatorConfig({}, { CHAMVI_SHUTDOWN_TIMEOUT_SECONDS: '0' })).toThrow(/shutdownTimeoutSeconds/);
  });
});
