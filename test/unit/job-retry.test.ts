import { describe, expect, it } from 'vitest';
import { JOB_ATTEMPTS, jobRetryDelayMs } from '../../operator/src/workers/job-retry.ts';

describe('agent job retries', () => {
  it('back off exponentially from 1 s and never wait more than 15 s between tries', () => {
    expect([1, 2, 3, 4, 5, 6, 9].map(jobRetryDelayMs)).toEqual([1_000, 2_000, 4_000, 8_000, 15_000, 15_000, 15_000]);
  });

  it('outlast an API server or Redis restart of a minute before a job fails for good', () => {
    let waited = 0;
    for (let attemptsMade = 1; attemptsMade < JOB_ATTEMPTS; attemptsMade++) waited += jobRetryDelayMs(attemptsMade);
    expect(waited).toBeGreaterThanOrEqual(60_000);
    expect(waited).toBeLessThanOrEqual(120_000);
  });
});
