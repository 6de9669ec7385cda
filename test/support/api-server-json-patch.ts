// JSON Patch (RFC 6902) as the API server applies it to an object (evanphx/json-patch): add,
// remove, replace and test, all or nothing. Its one departure from the RFC is kept, since the
// operator's claim patch relies on it: a `test` of a missing member against null passes.
// For unit tests of patches the operator sends; the integration tests send them for real.
import { isDeepStrictEqual } from 'node:util';

export class JsonPatchTestFailed extends Error {
  override readonly name = 'JsonPatchTestFailed';
}

type Operation = { op: string; path: string; value?: unknown };

/** `document` with `patch` applied, or a throw (JsonPatchTestFailed for a failed test) that leaves it as it was. */
export function applyAsApiServer<T>(document: T, patch: readonly object[]): T {
  const copy = structuredClone(document) as Record<string, unknown>;
  for (const { op, path, value } of patch as Operation[]) {
    const keys = path
      .split('/')
      .slice(1)
      .map((key) => key.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = keys.pop()!;
    let parent: Record<string, unknown> | undefined = copy;
    for (const key of keys) parent = parent?.[key] as Record<string, unknown> | undefined;
    if (parent === undefined || typeof parent !== 'object') throw new Error(`${op} ${path}: the document is missing its parent`);
    const present = Object.hasOwn(parent, last) && parent[last] !== undefined;
    if (op === 'test') {
      const passes = present ? value !== null && isDeepStrictEqual(parent[last], value) : value === null || value === undefined;
      if (!passes) throw new JsonPatchTestFailed(`testing value ${path} failed`);
    } else if (op === 'add') parent[last] = value;
    else if (op === 'replace' && present) parent[last] = value;
    else if (op === 'remove' && present) delete parent[last];
    else throw new Error(`${op} ${path}: not applicable`);
  }
  return copy as T;
}
