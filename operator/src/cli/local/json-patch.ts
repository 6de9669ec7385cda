// The part of RFC 6902 JSON Patch the status writer sends (test, add, replace, remove), for
// the in-memory API server. A failed test or a missing parent is a PatchRefusedError, as
// the API server answers 422.
import { isDeepStrictEqual } from 'node:util';

export class PatchRefusedError extends Error {
  override readonly name = 'PatchRefusedError';
  /** The HTTP status the API server would answer; RunStatusWriter reads it. */
  readonly code = 422;
}

interface Operation {
  op: string;
  path: string;
  value?: unknown;
}

function tokens(pointer: string): string[] {
  if (!pointer.startsWith('/')) throw new PatchRefusedError(`JSON pointer "${pointer}" does not start with /`);
  return pointer
    .slice(1)
    .split('/')
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function parentOf(document: Record<string, unknown>, pointer: string): { parent: Record<string, unknown>; key: string } {
  const path = tokens(pointer);
  let parent: unknown = document;
  for (const token of path.slice(0, -1)) {
    parent = (parent as Record<string, unknown> | undefined)?.[token];
    if (typeof parent !== 'object' || parent === null) throw new PatchRefusedError(`${pointer}: the parent does not exist`);
  }
  return { parent: parent as Record<string, unknown>, key: path.at(-1)! };
}

/** Applies the operations to a copy of `document`; throws PatchRefusedError and leaves it alone when one fails. */
export function applyJsonPatch<T extends object>(document: T, operations: readonly object[]): T {
  const copy = structuredClone(document) as Record<string, unknown>;
  for (const operation of operations as Operation[]) {
    const { parent, key } = parentOf(copy, operation.path);
    switch (operation.op) {
      case 'test':
        if (!isDeepStrictEqual(parent[key], operation.value)) throw new PatchRefusedError(`test of ${operation.path} failed`);
        break;
      case 'add':
        parent[key] = structuredClone(operation.value);
        break;
      case 'replace':
        if (!(key in parent)) throw new PatchRefusedError(`${operation.path}: nothing to replace`);
        parent[key] = structuredClone(operation.value);
        break;
      case 'remove':
        if (!(key in parent)) throw new PatchRefusedError(`${operation.path}: nothing to remove`);
        delete parent[key];
        break;
      default:
        throw new PatchRefusedError(`JSON Patch op "${operation.op}" is not supported here`);
    }
  }
  return copy as T;
}
