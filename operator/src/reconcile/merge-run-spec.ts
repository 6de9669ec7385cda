// How a CodingSchedule's runTemplate.spec is laid over a CodingRunTemplate's spec: objects
// merge field by field, recursively; anything else the override sets (text, number, boolean,
// list) replaces the template's value whole. This is JSON merge patch (RFC 7386) without its
// null-deletes, so `kubectl patch --type merge` is the mental model. Lists are not merged by
// key on purpose: sandbox.env or tools.allow given on the schedule is the whole list.
// Pure; the caller parses the result as a plain CodingRun spec (the same validation).

type Json = unknown;

const isObject = (value: Json): value is Record<string, Json> => typeof value === 'object' && value !== null && !Array.isArray(value);

export function mergeRunSpec(template: Record<string, Json>, override: Record<string, Json>): Record<string, Json> {
  const merged: Record<string, Json> = { ...template };
  for (const [key, value] of Object.entries(override)) {
    if (value === undefined || value === null) continue;
    const base = merged[key];
    merged[key] = isObject(base) && isObject(value) ? mergeRunSpec(base, value) : value;
  }
  return merged;
}
