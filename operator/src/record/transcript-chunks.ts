// The transcript's wire format: entries (transcript-entry.ts) kept as gzip-compressed JSON under
// binaryData keys of ConfigMaps owned by the run ("chunks"), STEPS_PER_CHUNK steps to a chunk.
// The one definition shared by the workers that write it (workers/transcript-writer.ts, local
// mode's) and the plugin that reads it (`kubectl codingrun logs`). Why ConfigMaps, and what they
// cost the API server: docs/transcript.md. Pure.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { gunzipSync, gzipSync } from 'node:zlib';
import { API_VERSION, GROUP, KIND, RUN_LABEL, RUN_UID_LABEL } from '../api/group.ts';
import { runNameLabel, transcriptConfigMapName, type RunIdentity } from '../reconcile/names.ts';
import { MANAGED_BY, MANAGED_BY_LABEL, isOwnedByRun, type OwnedMetadata } from '../reconcile/ownership.ts';
import { DEFAULT_BOUNDS, ENTRY_KEY_PATTERN, boundEntry, type EntryBounds, type TranscriptEntry } from './transcript-entry.ts';

/** Label on a transcript chunk, so the plugin lists a run's chunks (and nothing else of it). */
export const RECORD_LABEL = `${GROUP}/record`;
export const RECORD_TRANSCRIPT = 'transcript';
/**
 * Steps per chunk: each step's entry is at most ENTRY_MAX_BYTES (16 KiB) compressed, so a
 * chunk of 16 steps stays far below the 1 MiB an object may hold even with base64's 4/3, and
 * the whole chunk the API server rewrites on each append stays small (docs/transcript.md).
 */
export const STEPS_PER_CHUNK = 16;
/** A compressed entry's bound; encodeEntry cuts its fields further until it fits. */
export const ENTRY_MAX_BYTES = 16 * 1024;
/** What the reader inflates per entry at most: a hand-written chunk cannot make it allocate more. */
const ENTRY_MAX_INFLATED = 1024 * 1024;
/** The wire version inside each entry's JSON. */
const WIRE_VERSION = 1;

/** The chunk an entry goes to: steps 1–16 in chunk 0, 17–32 in chunk 1; step 0 (before the first) in chunk 0. */
export const chunkIndexOf = (step: number) => Math.floor(Math.max(0, step - 1) / STEPS_PER_CHUNK);

/** Whether an entry opens its chunk: the writer then creates the chunk instead of patching it. */
export const opensChunk = (entry: Pick<TranscriptEntry, 'kind' | 'step'>) =>
  entry.kind === 'step' && (entry.step - 1) % STEPS_PER_CHUNK === 0;

/** The entry's bytes under its key: gzip of its JSON, its fields cut until it is at most ENTRY_MAX_BYTES. */
export function encodeEntry(entry: TranscriptEntry, maxBytes = ENTRY_MAX_BYTES): { key: string; value: Buffer } {
  if (!ENTRY_KEY_PATTERN.test(entry.key))
    throw new Error(`transcript key "${entry.key}" is not of the form s000042[-c000007|-v000001|-end|-cut]`);
  let bounds: EntryBounds = DEFAULT_BOUNDS;
  for (let attempt = 0; ; attempt++) {
    const value = gzipSync(JSON.stringify({ v: WIRE_VERSION, ...boundEntry(entry, bounds) }));
    if (value.length <= maxBytes) return { key: entry.key, value };
    // Incompressible text (random bytes, base64) needs smaller fields; after eight halvings
    // the fields are a few bytes each and only a step with thousands of calls is still over.
    if (attempt === 8) {
      const { calls, ...rest } = entry;
      const note = `${calls?.length ?? 0} tool calls left out: the step's record exceeded ${maxBytes} bytes compressed`;
      return { key: entry.key, value: gzipSync(JSON.stringify({ v: WIRE_VERSION, ...boundEntry(rest, bounds), message: note })) };
    }
    bounds = {
      text: bounds.text >> 1,
      input: bounds.input >> 1,
      output: bounds.output >> 1,
      summary: bounds.summary >> 1,
    };
  }
}

/** The entry under a key, or why it cannot be read (a hand-edited chunk, a newer operator). */
/**
 * The parts every reader walks without checking (an eval's evidence, `logs`): calls as a list of
 * objects with a string id and tool, a message as text. A chunk is a ConfigMap anyone who may
 * edit ConfigMaps in the namespace can change; an entry with `calls: {}` once made an eval's
 * grading throw before it wrote any status, so the eval was retried forever.
 */
function readableParts(entry: Partial<TranscriptEntry>): boolean {
  const calls: unknown = entry.calls;
  if (calls !== undefined) {
    if (!Array.isArray(calls)) return false;
    for (const call of calls as unknown[]) {
      if (typeof call !== 'object' || call === null) return false;
      const { id, tool, result } = call as { id?: unknown; tool?: unknown; result?: unknown };
      if (typeof id !== 'string' || typeof tool !== 'string' || (result !== undefined && (typeof result !== 'object' || result === null)))
        return false;
    }
  }
  return entry.message === undefined || typeof entry.message === 'string';
}

export function decodeEntry(key: string, base64: string): TranscriptEntry | { problem: string } {
  try {
    const json = gunzipSync(Buffer.from(base64, 'base64'), { maxOutputLength: ENTRY_MAX_INFLATED }).toString('utf8');
    const { v, ...entry } = JSON.parse(json) as Partial<TranscriptEntry> & { v?: unknown };
    if (v !== WIRE_VERSION) return { problem: `entry ${key} has wire version ${String(v)}, not ${WIRE_VERSION}` };
    if (entry.key !== key || typeof entry.step !== 'number' || typeof entry.kind !== 'string' || !readableParts(entry))
      return { problem: `entry ${key} is not a transcript entry` };
    return entry as TranscriptEntry;
  } catch (error) {
    return { problem: `entry ${key} cannot be read: ${error instanceof Error ? error.message : String(error)}` };
  }
}

const labelsFor = (run: RunIdentity): Record<string, string> => ({
  [MANAGED_BY_LABEL]: MANAGED_BY,
  [RUN_LABEL]: runNameLabel(run.metadata.name),
  [RUN_UID_LABEL]: run.metadata.uid,
  [RECORD_LABEL]: RECORD_TRANSCRIPT,
});

/** The label selector of a run's chunks. */
export const transcriptSelector = (uid: string) => `${RUN_UID_LABEL}=${uid},${RECORD_LABEL}=${RECORD_TRANSCRIPT}`;

/** A chunk holding `entries` (key → gzip bytes), owned by the run, under its derived name. */
export function buildTranscriptChunk(
  run: RunIdentity & { metadata: { namespace?: string } },
  index: number,
  entries: Record<string, Buffer>,
): V1ConfigMap {
  // The run controls its chunks: garbage collection removes them with it, and the plugin
  // reads only chunks whose controller is the run (ownership.ts).
  const owner = {
    apiVersion: API_VERSION,
    kind: KIND,
    name: run.metadata.name,
    uid: run.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: transcriptConfigMapName(run, index),
      ...(run.metadata.namespace ? { namespace: run.metadata.namespace } : {}),
      labels: labelsFor(run),
      ownerReferences: [owner],
    },
    binaryData: Object.fromEntries(Object.entries(entries).map(([key, value]) => [key, value.toString('base64')])),
  };
}

/** What the reader needs of a chunk: its owner, its labels and its entries. */
export interface TranscriptChunk extends OwnedMetadata {
  binaryData?: Record<string, string>;
}

export interface Transcript {
  entries: TranscriptEntry[];
  /** Entries that could not be read, and chunks not owned by the run (a squatter's), said once each. */
  problems: string[];
}

/**
 * The run's transcript from its chunks, in order. Only chunks the run owns count (anyone who
 * may create ConfigMaps in the namespace can label one like a chunk); a key found twice (a
 * redone step's entry, or one the writer had to put in a second chunk) is read once.
 */
export function readTranscript(chunks: readonly TranscriptChunk[], run: { metadata: { uid: string } }): Transcript {
  const byKey = new Map<string, TranscriptEntry>();
  const problems: string[] = [];
  for (const chunk of chunks) {
    if (!isOwnedByRun(chunk, run)) {
      problems.push(`ignored a ConfigMap labelled as this run's transcript that the run does not own`);
      continue;
    }
    for (const [key, value] of Object.entries(chunk.binaryData ?? {})) {
      if (!ENTRY_KEY_PATTERN.test(key) || byKey.has(key)) continue;
      const entry = decodeEntry(key, value);
      if ('problem' in entry) problems.push(entry.problem);
      else byKey.set(key, entry);
    }
  }
  const entries = [...byKey.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { entries, problems };
}
