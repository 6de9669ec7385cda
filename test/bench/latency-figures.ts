// Percentiles of a list of durations, the way every benchmark here reports them.

export interface LatencyFigure {
  p50: number;
  p99: number;
  max: number;
  n: number;
}

/** Nearest-rank percentile: the smallest sample with at least p% of samples at or below it. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const roundTo = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

export function latencyFigure(samples: readonly number[], digits = 1): LatencyFigure {
  return {
    p50: roundTo(percentile(samples, 50), digits),
    p99: roundTo(percentile(samples, 99), digits),
    max: roundTo(samples.length > 0 ? Math.max(...samples) : Number.NaN, digits),
    n: samples.length,
  };
}
