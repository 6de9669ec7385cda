// quantityValue: what the schema's request-within-limit rule and the sandbox pod's merge of the
// operator defaults compare. It must read every suffix Kubernetes does, and nothing else.
import { describe, expect, it } from 'vitest';
import { quantityValue } from '../../operator/src/api/resource-quantity.ts';

describe('quantityValue', () => {
  it.each([
    [4, 4],
    ['4', 4],
    ['250m', 0.25],
    ['.5', 0.5],
    ['512Mi', 512 * 2 ** 20],
    ['2Gi', 2 * 2 ** 30],
    ['1k', 1000],
    ['1e3', 1000],
    ['1.5E-3', 0.0015],
    ['100n', 100e-9],
  ])('reads %j as %d', (quantity, value) => {
    expect(quantityValue(quantity)).toBeCloseTo(value, 12);
  });

  it.each(['lots', '1KB', '1 Gi', '', 'Mi'])('reads %j as no quantity', (quantity) => {
    expect(quantityValue(quantity)).toBeUndefined();
  });

  it('orders a binary and a decimal suffix by value, as the API server does', () => {
    expect(quantityValue('1Gi')!).toBeGreaterThan(quantityValue('1G')!);
    expect(quantityValue('2000m')).toBe(quantityValue('2'));
  });
});
