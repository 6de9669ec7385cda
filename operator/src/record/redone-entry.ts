// When two of the writer's entries under one key are one entry written twice. An answer to an
// approval or a spec.verify check redone after a failed try is built again with a new `at` (and
// a check's `durationMs`); when its chunk would not take it, the writer keeps it apart in a
// chunk of its own (workers/transcript-writer.ts), and the reader met the same key twice with
// different bytes: `logs` warned of tampering and an eval counted a gap in an honest run. Only
// when and how long differ; anything else that does stays a possible forgery. Pure.
import { createHash } from 'node:crypto';
import type { TranscriptEntry } from './transcript-entry.ts';

/** JSON with every object's members in name order, so equal entries give equal text whatever order they were written in. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const members = Object.entries(value as Record<string, unknown>)
      .filter(([, member]) => member !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${members.map(([name, member]) => `${JSON.stringify(name)}:${canonical(member)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** A digest of the entry without when it was written and how long it took: equal for the same entry redone. */
export function redoneEntryDigest(entry: TranscriptEntry): string {
  const { at: _at, durationMs: _durationMs, ...rest } = entry;
  const compared = rest.verification ? { ...rest, verification: { ...rest.verification, durationMs: 0 } } : rest;
  return createHash('sha256').update(canonical(compared)).digest('base64');
}
