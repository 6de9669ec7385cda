// Reads how long a provider asked us to wait. OpenAI sends `retry-after-ms`; the HTTP
// standard `retry-after` is either seconds or an HTTP date.

export function retryAfterMs(headers: Record<string, string | undefined> | undefined, now: number): number | undefined {
  if (headers === undefined) return undefined;
  const lower = Object.fromEntries(Object.entries(headers).map(([key, value]) => [key.toLowerCase(), value]));
  const milliseconds = parseNonNegative(lower['retry-after-ms']);
  if (milliseconds !== undefined) return milliseconds;
  const value = lower['retry-after']?.trim();
  if (value === undefined || value === '') return undefined;
  const seconds = parseNonNegative(value);
  if (seconds !== undefined) return seconds * 1000;
  // An HTTP date names its weekday and month; without letters it is a malformed number,
  // which Date.parse would happily read as a year.
  if (!/[a-z]/i.test(value)) return undefined;
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

function parseNonNegative(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*\d+(\.\d+)?\s*$/.test(value)) return undefined;
  return Number(value);
}
