// Durations in the Go/Kubernetes notation users already write elsewhere ("30m", "1h30m", "90s").
// The same pattern goes into the CRD so the API server refuses a bad value at `kubectl apply`.

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

/** One or more `<number><unit>` parts; no sign, no spaces, no days (Go has none either). */
export const DURATION_PATTERN = '^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$';
const DURATION_REGEX = new RegExp(DURATION_PATTERN);
const PART_REGEX = /([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)/g;

/** Milliseconds in a duration string, or undefined when it does not parse. */
export function parseDuration(text: string): number | undefined {
  if (!DURATION_REGEX.test(text)) return undefined;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(PART_REGEX)) {
    total += Number(amount) * UNIT_MS[unit!]!;
  }
  return Math.round(total);
}

/** Milliseconds in a duration the schema has already validated. */
export function durationMs(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined) throw new Error(`not a duration: ${JSON.stringify(text)}`);
  return ms;
}
