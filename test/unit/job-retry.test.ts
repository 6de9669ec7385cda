import { describe, expect, it } from 'vitest';
import { FORBIDDEN_ATTEMPTS, JOB_ATTEMPTS, isForbidden, jobRetryDelayMs } from '../../operator/src/workers/job-retry.ts';

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

  it('give up on a forbidden refusal after a few seconds, not a minute and a half', () => {
    let waited = 0;
    for (let attemptsMade = 1; attemptsMade < FORBIDDEN_ATTEMPTS; attemptsMade++) waited += jobRetryDelayMs(attemptsMade);
    expect(waited).toBeGreaterThanOrEqual(5_000);
    expect(waited).toBeLessThanOrEqual(15_000);
  });

  it('tell a forbidden refusal from other failures', () => {
    expect(isForbidden(Object.assign(new Error('HTTP-Code: 403'), { code: 403 }))).toBe(true);
    expect(isForbidden(new Error('HTTP-Code: 403 Message: Unknown API Status Code! Body: {"kind":"Status","reason":"Forbidden"}'))).toBe(
      true,
    );
    expect(isForbidden(new Error('exec into pod a/b-sandbox failed: Unexpected server response: 403'))).toBe(true);
    expect(isForbidden(new Error('exec into pod a/b-sandbox failed: Unexpected server response: 404'))).toBe(false);
    expect(isForbidden(new Error('connect ECONNREFUSED 127.0.0.1:6443'))).toBe(false);
    expect(isForbidden(Object.assign(new Error('conflict'), { code: 409 }))).toBe(false);
    expect(isForbidden(new Error('HTTP-Code: 4031'))).toBe(false);
  });
});
