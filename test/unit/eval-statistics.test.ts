// pass@k and the distributions of a CodingEval's status, checked against values worked by hand.
import { describe, expect, it } from 'vitest';
import { distributionOf, percentile } from '../../operator/src/evals/distribution.ts';
import { passAtK } from '../../operator/src/evals/pass-at-k.ts';

const choose = (n: number, k: number): number => (k < 0 || k > n ? 0 : k === 0 ? 1 : (choose(n - 1, k - 1) * n) / k);

describe('passAtK', () => {
  it.each([
    [5, 0, 1, 0],
    [5, 5, 1, 1],
    [5, 2, 1, 0.4],
    [5, 2, 3, 1 - choose(3, 3) / choose(5, 3)], // 0.9
    [10, 3, 5, 1 - choose(7, 5) / choose(10, 5)],
    [4, 1, 4, 1],
    [20, 1, 2, 0.1],
  ])('n=%i c=%i k=%i is %f', (n, c, k, expected) => {
    expect(passAtK(n, c, k)).toBeCloseTo(expected, 12);
  });

  it('pass@1 is the pass rate', () => {
    for (let c = 0; c <= 7; c++) expect(passAtK(7, c, 1)).toBeCloseTo(c / 7, 12);
  });

  it('refuses k above n', () => {
    expect(() => passAtK(3, 1, 4)).toThrow(RangeError);
  });
});

describe('distributionOf', () => {
  it('takes the mean and nearest-rank percentiles', () => {
    expect(distributionOf([100, 400, 200, 300, 1000])).toEqual({ mean: 400, p50: 300, p90: 1000 });
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90)).toBe(9);
    expect(distributionOf([])).toEqual({ mean: 0, p50: 0, p90: 0 });
  });
});
