// JSON with keys sorted and undefined left out. For comparing what the API server answered
// with what a builder made (the answer's key order, its class instances: client-node gives each
// object its model's prototype, and absent-versus-undefined fields change nothing), and for the
// spec digests kept in `chamvi-finished-runs` (finished-runs.ts): those are persisted, so this
// output must never change. Keys are sorted by UTF-16 code unit, integer-like ones too (an
// object rebuilt with Object.fromEntries would put "10" before "2" and both before "a"). Pure.

export function canonicalJson(value: unknown): string {
  return value === undefined ? 'undefined' : encode(value);
}

function encode(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(encode).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, each]) => each !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, each]) => `${JSON.stringify(key)}:${encode(each)}`).join(',')}}`;
  }
  // An undefined array element is null, as JSON.stringify writes it.
  return JSON.stringify(value) ?? 'null';
}

/** Whether two values are the same as JSON (see above). */
export const sameJson = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b);
