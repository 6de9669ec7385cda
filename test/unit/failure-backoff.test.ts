import { describe, expect, it } from 'vitest';
import { FailureBackoff } from '../../operator/src/controller/failure-backoff.ts';

describe('FailureBackoff', () => {
  it('holds a key 2 s after its first failure, doubling with each failure in a row', () => {
    const backoff = new FailureBackoff();
    expect([1, 2, 3, 4].map(() => backoff.fail('pool', 1_000))).toEqual([2_000, 4_000, 8_000, 16_000]);
    expect(backoff.holds('pool', 1_000 + 15_999)).toBe(true);
    expect(backoff.holds('pool', 1_000 + 16_000)).toBe(false);
  });

  it('waits at most 5 min however many failures come in a row', () => {
    const backoff = new FailureBackoff();
    const waits = Array.from({ length: 40 }, () => backoff.fail('pool', 0));
    expect(waits.slice(8)).toEqual(Array.from({ length: 32 }, () => 300_000));
    expect(backoff.holds('pool', 299_999)).toBe(true);
    expect(backoff.holds('pool', 300_000)).toBe(false);
  });

  it('after a clear holds the key no more and starts again at 2 s', () => {
    const backoff = new FailureBackoff();
    backoff.fail('pool', 0);
    backoff.fail('pool', 0);
    backoff.clear('pool');
    expect(backoff.holds('pool', 0)).toBe(false);
    expect(backoff.lastFailedAt('pool')).toBeUndefined();
    expect(backoff.fail('pool', 10)).toBe(2_000);
  });

  it('counts each key apart and remembers when each last failed', () => {
    const backoff = new FailureBackoff();
    backoff.fail('a', 5);
    backoff.fail('a', 7);
    expect(backoff.holds('b', 7)).toBe(false);
    expect(backoff.lastFailedAt('a')).toBe(7);
    expect(backoff.lastFailedAt('b')).toBeUndefined();
    expect(backoff.fail('b', 7)).toBe(2_000);
    expect(backoff.holds('a', 7 + 3_999)).toBe(true);
  });
});
