// The transcript's wire format: entries (transcript-entry.ts) kept as gzip-compressed JSON under
// binaryData keys of ConfigMaps owned by the run ("chunks"), STEPS_PER_CHUNK steps to a chunk.
// The one definition shared by the workers that write it (workers/transcript-writer.ts, local
// mode's) and the plugin that reads it (`kubectl codingrun logs`). Why ConfigMaps, and what they
// cost the API server: docs/transcript.md. Pure.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { API_VERSION, GROUP, KIND, RUN_LABEL, RUN_UID_LABEL } from '../api/group.ts';
import { runNameLabel, transcriptConfigMapName, type RunIdentity } from '../reconcile/names.ts';
import { MANAGED_BY, MANAGED_BY_LABEL, isOwnedByRun, whyNotOwned, type OwnedMetadata } from '../reconcile/ownership.ts';
import { shortField } from '../reconcile/short-field.ts';
import {
  DEFAULT_BOUNDS,
  ENTRY_KEY_PATTERN,
  MAX_RECORDED_STEPS,
  boundEntry,
  type EntryBounds,
  type TranscriptEntry,
} from './transcript-entry.ts';
import { parseTranscriptEntry } from './transcript-entry-schema.ts';
import { compareEntryKeys } from './transcript-entry-order.ts';
import { redoneEntryDigest } from './redone-entry.ts';

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
export const ENTRY_MAX_INFLATED = 1024 * 1024;
/**
 * An entry's JSON bound (what a reader inflates it to); encodeEntry cuts its fields until it
 * fits as it does for ENTRY_MAX_BYTES. Repetitive text compresses well: with only the compressed
 * bound a step inflated to about 280 KB, and 241 of them filled TRANSCRIPT_MAX_INFLATED_BYTES.
 * A writer's whole transcript is at most about 1 015 entries (500 steps, 500 answers, two cuts,
 * 11 checks, a publish answer, an end), and 1 024 of 64 KiB fit the reader's 64 MiB.
 */
export const ENTRY_MAX_JSON_BYTES = 64 * 1024;
/** The wire version inside each entry's JSON. */
const WIRE_VERSION = 1;

/** The chunk an entry goes to: steps 1–16 in chunk 0, 17–32 in chunk 1; step 0 (before the first) in chunk 0. */
export const chunkIndexOf = (step: number) => Math.floor(Math.max(0, step - 1) / STEPS_PER_CHUNK);

/** Whether an entry opens its chunk: the writer then creates the chunk instead of patching it. */
export const opensChunk = (entry: Pick<TranscriptEntry, 'kind' | 'step'>) =>
  entry.kind === 'step' && (entry.step - 1) % STEPS_PER_CHUNK === 0;

/**
 * The entry's bytes under its key: gzip of its JSON, its fields cut until the JSON is at most
 * ENTRY_MAX_JSON_BYTES and its gzip at most ENTRY_MAX_BYTES.
 */
export function encodeEntry(
  entry: TranscriptEntry,
  maxBytes = ENTRY_MAX_BYTES,
  maxJsonBytes = ENTRY_MAX_JSON_BYTES,
): { key: string; value: Buffer } {
  if (!ENTRY_KEY_PATTERN.test(entry.key))
    throw new Error(`transcript key "${entry.key}" is not of the form s000042[-c000007|-v000001|-end|-cut]`);
  let bounds: EntryBounds = DEFAULT_BOUNDS;
  for (let attempt = 0; ; attempt++) {
    const json = JSON.stringify({ v: WIRE_VERSION, ...boundEntry(entry, bounds) });
    // Measured before compressing: an entry over its JSON bound is not worth the gzip.
    const value = Buffer.byteLength(json, 'utf8') <= maxJsonBytes ? gzipSync(json) : undefined;
    if (value && value.length <= maxBytes) return { key: entry.key, value };
    // Incompressible text (random bytes, base64) needs smaller fields, and so does a step of many
    // calls; after eight halvings the fields are a few bytes each and only a step with thousands
    // of calls is still over.
    if (attempt === 8) {
      const { calls, ...rest } = entry;
      const note = `${calls?.length ?? 0} tool calls left out: the step's record exceeded ${maxBytes} bytes compressed or ${maxJsonBytes} bytes of JSON`;
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
export function decodeEntry(key: string, base64: string): TranscriptEntry | { problem: string } {
  return decodeMeasured(key, base64).decoded;
}

/** decodeEntry, and how many bytes it inflated (the reader's bound counts them). */
function decodeMeasured(key: string, base64: string): { decoded: TranscriptEntry | { problem: string }; inflated: number } {
  let inflated = 0;
  try {
    const bytes = gunzipSync(Buffer.from(base64, 'base64'), { maxOutputLength: ENTRY_MAX_INFLATED });
    inflated = bytes.length;
    const { v, ...fields } = JSON.parse(bytes.toString('utf8')) as { v?: unknown; key?: unknown };
    // Quoted short: whoever wrote the chunk chose them, up to the megabyte an entry inflates to.
    if (v !== WIRE_VERSION)
      return { decoded: { problem: `entry ${key} has wire version ${shortField(v)}, not ${WIRE_VERSION}` }, inflated };
    if (fields.key !== key)
      return { decoded: { problem: `entry ${key} is not a transcript entry: it names itself ${shortField(fields.key)}` }, inflated };
    const parsed = parseTranscriptEntry(fields);
    return {
      decoded: 'entry' in parsed ? parsed.entry : { problem: `entry ${key} is not a transcript entry: ${shortField(parsed.problem, 400)}` },
      inflated,
    };
  } catch (error) {
    // Refused at the inflate bound, cut short, or not gzip: gunzipSync does not say how much it
    // inflated first, and a refused bomb of 1 KiB costs a megabyte of inflating. Counted at its
    // size on the wire, 10 000 of them were 10 GiB inflated in one read; counted at the bound,
    // the reader's 64 MiB bounds the work as well as what is kept. Inflated whole but not JSON,
    // it cost what it inflated to: charged a megabyte, 64 entries of `{` stopped a read.
    const problem = `entry ${key} cannot be read: ${shortField(error instanceof Error ? error.message : error, 400)}`;
    return { decoded: { problem }, inflated: inflated > 0 ? inflated : ENTRY_MAX_INFLATED };
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

/** What the reader needs of a chunk: its name, its owner, its labels and its entries. */
export interface TranscriptChunk extends OwnedMetadata {
  metadata?: OwnedMetadata['metadata'] & { name?: string };
  binaryData?: Record<string, string>;
}

export interface Transcript {
  entries: TranscriptEntry[];
  /** Entries that could not be read, chunks that are not the run's, and what the reader's bounds left out, said once each. */
  problems: string[];
}

/**
 * What one read inflates and decodes at most. A writer's transcript is at most
 * MAX_RECORDED_STEPS steps and MAX_RECORDED_APPROVALS answers to approvals, with a few checks,
 * cuts and an end, of ENTRY_MAX_JSON_BYTES inflated each: about 63.5 MiB, so a writer's
 * transcript is read whole (a typical step is 1–3 KiB compressed). A hand-made chunk of 1 MiB
 * held 670 entries that each inflated to 1 MiB, and two of them took a reader's heap to 1.2 GiB.
 * The operator's eval grading reads transcripts too, inside a 160 MiB heap.
 */
export const TRANSCRIPT_MAX_INFLATED_BYTES = 64 * 1024 * 1024;
export const TRANSCRIPT_MAX_ENTRIES = 10_000;
/**
 * How many ConfigMaps labelled as the run's chunks but not its own (another controller, a name
 * no writer gives) a read passes over before it stops. Ignoring one decodes nothing, but each
 * once cost a problem quoting its owner whole: 150 with a 1 MiB `kind` made 209 MB of problems.
 * A writer's own chunks are never ignored, so this many means someone is filling the namespace.
 */
export const TRANSCRIPT_MAX_IGNORED_CHUNKS = 1_000;
/** Ignored ConfigMaps named one problem each; the rest are counted in one. */
export const IGNORED_CHUNKS_LISTED = 20;
/** Other problems (unreadable entries, entries found twice) listed; the rest are counted in one. */
export const PROBLEMS_LISTED = 100;
/**
 * Problems past PROBLEMS_LISTED told apart (by a 44-character digest each), so one met again
 * is not counted again: as many as a read decodes entries, about a megabyte at most.
 */
const UNLISTED_PROBLEMS_KEPT = TRANSCRIPT_MAX_ENTRIES;

/** The highest chunk index a writer uses: the `cut` entry's step is MAX_RECORDED_STEPS + 1. */
const LAST_CHUNK_INDEX = chunkIndexOf(MAX_RECORDED_STEPS + 1);
/** The API server cuts a generateName prefix to this length before it adds 5 characters. */
const GENERATED_PREFIX_LENGTH = 58;

/**
 * The names a writer gives the run's chunks, each to its chunk index: the derived ones, and the
 * generateName prefixes of those it keeps apart (transcript-writer.ts).
 */
function chunkNames(run: RunIdentity): { derived: Map<string, number>; apart: Map<string, number> } {
  const derived = new Map<string, number>();
  const apart = new Map<string, number>();
  for (let index = 0; index <= LAST_CHUNK_INDEX; index++) {
    const name = transcriptConfigMapName(run, index);
    derived.set(name, index);
    // A name cut to the prefix length may be shared by several indexes: the first one holds it.
    const prefix = `${name}-`.slice(0, GENERATED_PREFIX_LENGTH);
    if (!apart.has(prefix)) apart.set(prefix, index);
  }
  return { derived, apart };
}

const isGeneratedFrom = (name: string, prefixes: ReadonlyMap<string, number>) =>
  /^[a-z0-9]{5}$/.test(name.slice(-5)) && prefixes.has(name.slice(0, -5));

/**
 * Reads a run's transcript from its chunks as they come (a list, pages of one, a watch's
 * events), in the order of compareEntryKeys. Only chunks the run owns under a name its writer
 * gives count (anyone who may create ConfigMaps in the namespace can label one like a chunk and
 * name the run as its controller: a name is checked as well, but neither proves who wrote it,
 * docs/transcript.md).
 * A key found twice is read once; found twice with different contents, it is a problem, since
 * the writer never does that (short of a redone entry kept apart, which differs only in when it
 * was written and took: redone-entry.ts): someone wrote a chunk beside the run's. Bounded: past
 * TRANSCRIPT_MAX_INFLATED_BYTES, TRANSCRIPT_MAX_ENTRIES or TRANSCRIPT_MAX_IGNORED_CHUNKS the rest
 * is left out and said to be; past IGNORED_CHUNKS_LISTED and PROBLEMS_LISTED problems are
 * counted, not listed, so what the problems hold stays small whatever the namespace holds.
 * `keep` makes what is kept of each entry smaller (the eval's grading keeps only the calls).
 */
export class TranscriptReader {
  /**
   * The entry read under each key: its bytes' digest, the digest that tells it redone
   * (redone-entry.ts), its chunk, and the digests of other bytes under the key already judged
   * against it (a watch sends their chunk again, and each judgement costs a decode).
   */
  private readonly byKey = new Map<
    string,
    { entry: TranscriptEntry; digest: string; redone: string; chunk: string; judged: Set<string> }
  >();
  private readonly problems = new Set<string>();
  /**
   * Problems past PROBLEMS_LISTED, by digest: each counted once, however often it is met again
   * (a watch event of its chunk decodes the same bad entry again). Past UNLISTED_PROBLEMS_KEPT
   * no more are kept, and the count says "at least".
   */
  private readonly unlisted = new Set<string>();
  /** The ignored ConfigMaps by name (a watch sends the same one again), the first IGNORED_CHUNKS_LISTED with why. */
  private readonly ignored = new Map<string, string>();
  private readonly names: { derived: Map<string, number>; apart: Map<string, number> };
  private inflated = 0;
  private decoded = 0;
  /** An entry of the run's came after the entries or bytes bound was reached: it was left out. */
  private leftOut = false;

  constructor(
    private readonly run: RunIdentity,
    private readonly keep: (entry: TranscriptEntry) => TranscriptEntry = (entry) => entry,
  ) {
    this.names = chunkNames(run);
  }

  /** True once a bound was reached: later chunks add nothing, so a caller may stop listing. */
  get full(): boolean {
    return (
      this.inflated >= TRANSCRIPT_MAX_INFLATED_BYTES ||
      this.decoded >= TRANSCRIPT_MAX_ENTRIES ||
      this.ignored.size >= TRANSCRIPT_MAX_IGNORED_CHUNKS
    );
  }

  add(chunks: readonly TranscriptChunk[]): this {
    // The API server lists by name (…-transcript-0, -1, -10, -11, …, -2): read the run's own
    // chunks first and by step, so when a bound stops the read, what is left out comes last.
    const ordered = chunks
      .map((chunk, position) => ({ chunk, position, order: this.chunkOrder(chunk.metadata?.name ?? '') }))
      .sort((a, b) => a.order - b.order || a.position - b.position);
    for (const { chunk } of ordered) this.addChunk(chunk);
    return this;
  }

  /** Where a chunk is read in a page: by its index, one kept apart after its derived one; other names last. */
  private chunkOrder(name: string): number {
    const derived = this.names.derived.get(name);
    if (derived !== undefined) return derived * 2;
    const apart = isGeneratedFrom(name, this.names.apart) ? this.names.apart.get(name.slice(0, -5)) : undefined;
    return apart !== undefined ? apart * 2 + 1 : Number.MAX_SAFE_INTEGER;
  }

  private addChunk(chunk: TranscriptChunk): void {
    const name = chunk.metadata?.name ?? '';
    if (!isOwnedByRun(chunk, this.run)) {
      this.ignore(name, () => `, which the run does not own: ${whyNotOwned(chunk, this.run)}`);
      return;
    }
    if (!this.names.derived.has(name) && !isGeneratedFrom(name, this.names.apart)) {
      this.ignore(name, () => ": the run's transcript is never written under that name");
      return;
    }
    for (const [key, value] of Object.entries(chunk.binaryData ?? {})) {
      if (!ENTRY_KEY_PATTERN.test(key)) continue;
      const digest = createHash('sha256').update(value).digest('hex');
      const seen = this.byKey.get(key);
      if (seen?.digest === digest || seen?.judged.has(digest)) continue;
      // The same chunk again with a new value under a key (a watch's next event after a redone
      // step's entry replaced the first): the newer one counts.
      if (seen && seen.chunk !== name) {
        this.compare(key, value, digest, seen, name);
        continue;
      }
      if (this.full) {
        this.leftOut = true;
        return;
      }
      const decoded = this.decode(key, value);
      if ('problem' in decoded) this.problem(decoded.problem);
      else this.byKey.set(key, { entry: this.keep(decoded), digest, redone: redoneEntryDigest(decoded), chunk: name, judged: new Set() });
    }
  }

  /** decodeMeasured, counted toward the bounds. */
  private decode(key: string, value: string): TranscriptEntry | { problem: string } {
    this.decoded += 1;
    const { decoded, inflated } = decodeMeasured(key, value);
    this.inflated += inflated;
    return decoded;
  }

  /**
   * A key met again in another of the run's chunks with other bytes: the same entry redone
   * (kept apart by its writer) is read once, anything else is a problem. Past a bound it is not
   * decoded, and is a problem: that it differs is all the reader knows.
   */
  private compare(key: string, value: string, digest: string, seen: { redone: string; chunk: string; judged: Set<string> }, name: string) {
    if (!this.full) {
      seen.judged.add(digest);
      const redone = this.decode(key, value);
      if (!('problem' in redone) && redoneEntryDigest(redone) === seen.redone) return;
    }
    this.problem(
      `entry ${key} is in two of the run's ConfigMaps with different contents (${seen.chunk} and ${name}): the first read is shown, and the record may have been tampered with`,
    );
  }

  /** A ConfigMap labelled as a chunk that is not the run's: named once, with why while few are; counted toward the bound. */
  private ignore(name: string, why: () => string): void {
    // Past a bound nothing more is kept, and a chunk that is not the run's holds nothing to leave out.
    if (this.ignored.has(name) || this.full) return;
    const listed = this.ignored.size < IGNORED_CHUNKS_LISTED;
    this.ignored.set(name, listed ? `ignored ConfigMap ${name}, labelled as this run's transcript${why()}` : '');
  }

  private problem(problem: string): void {
    if (this.problems.has(problem)) return;
    if (this.problems.size < PROBLEMS_LISTED) this.problems.add(problem);
    else if (this.unlisted.size < UNLISTED_PROBLEMS_KEPT) this.unlisted.add(createHash('sha256').update(problem).digest('base64'));
  }

  result(): Transcript {
    const entries = [...this.byKey.values()].map(({ entry }) => entry).sort((a, b) => compareEntryKeys(a.key, b.key));
    const ignored = [...this.ignored.values()].filter((problem) => problem !== '');
    const more = this.ignored.size - ignored.length;
    return {
      entries,
      problems: [
        ...ignored,
        ...(more > 0 ? [`ignored ${more} more ConfigMaps labelled as this run's transcript that are not the run's`] : []),
        ...(this.ignored.size >= TRANSCRIPT_MAX_IGNORED_CHUNKS
          ? [
              `stopped reading after ${TRANSCRIPT_MAX_IGNORED_CHUNKS} ConfigMaps labelled as this run's transcript that are not the run's: ` +
                'someone who may create ConfigMaps in the namespace made them, and part of the transcript may not have been read',
            ]
          : []),
        ...this.problems,
        ...(this.unlisted.size > 0
          ? [
              `${this.unlisted.size >= UNLISTED_PROBLEMS_KEPT ? 'at least ' : ''}${this.unlisted.size} more problems reading the transcript are not listed`,
            ]
          : []),
        ...(this.leftOut
          ? [
              `the transcript was read up to ${TRANSCRIPT_MAX_ENTRIES} entries or ${TRANSCRIPT_MAX_INFLATED_BYTES / 1024 / 1024} MiB inflated; the rest was left out`,
            ]
          : []),
      ],
    };
  }
}

/** The run's transcript from its chunks, in the order of compareEntryKeys (TranscriptReader, read at once). */
export function readTranscript(chunks: readonly TranscriptChunk[], run: RunIdentity): Transcript {
  return new TranscriptReader(run).add(chunks).result();
}
