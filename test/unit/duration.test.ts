import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../operator/src/api/duration.ts';

describe('parseDuration', () => {
  it.each([
    ['30m', 1_800_000],
    ['24h', 86_400_000],
    ['1h30m', 5_400_000],
    ['90s', 90_000],
    ['1.5s', 1_500],
    ['250ms', 250],
  ])('reads %s as %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '30', 'm', '-5m', '5 m', '1d', '10 minutes', '1h 30m'])('refuses %j', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});
