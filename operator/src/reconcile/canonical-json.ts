// JSON with keys sorted and undefined left out, for comparing what the API server answered
// with what a builder made: the answer's key order, its class instances (client-node gives each
// object its model's prototype) and absent-versus-undefined fields change nothing. Pure.

export function canonicalJson(value: unknown): string {
  return (
    JSON.stringify(value, (_key, item: unknown) =>
      item && typeof item === 'object' && !Array.isArray(item)
        ? Object.fromEntries(
            Object.entries(item)
              .filter(([, each]) => each !== undefined)
              .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
          )
        : item,
    ) ?? 'undefined'
  );
}

/** Whether two values are the same as JSON (see above). */
export const sameJson = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b);
