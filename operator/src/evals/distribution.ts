// Mean and nearest-rank percentiles of a list of numbers, for tokens and durations per task ×
// model. Nearest rank, so every figure is a value some attempt had. Pure.
import type { Distribution } from '../api/coding-eval.ts';

/** The value at percentile p (0 < p <= 100) by the nearest-rank method; 0 for no values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

const round = (value: number) => Math.round(value * 1000) / 1000;

export function distributionOf(values: readonly number[]): Distribution {
  const mean = values.length === 0 ? 0 : values.reduce((sum, value) => sum + value, 0) / values.length;
  return { mean: round(mean), p50: round(percentile(values, 50)), p90: round(percentile(values, 90)) };
}
