// The scripted model's script, kept per run: read from its ConfigMap at the run's first step
// and replayed from memory after it, instead of a GET per step (issue #17.5). The scripted
// provider is for demos, tests and reproducing a run (docs/api-reference.md), so keeping its
// script costs no one a key rotation: an API key Secret is still read for every model call
// (model-factory.ts).
//
// Only an optimisation: a step whose run has no entry here reads the ConfigMap again, and that
// is correct, because a call picks its turn from the conversation it is given
// (scripted-turn-index.ts), not from anything kept with the script. So a run replays the script
// it started with for as long as this replica keeps it; a step on another replica (a run's
// jobs spread over them) or after its entry was dropped reads the ConfigMap as it is then, and
// an edit made meanwhile applies from that step on. That is no hole: the ConfigMap is in the
// run's own namespace, a script only says what the model answers (every tool call it makes
// goes through the same policy and approvals as a real model's), and a ConfigMap removed
// meanwhile fails the run as it would have at its first step.
//
// Bounded twice: a replica steps scripted runs by the hundred thousand in a long soak, and a run
// that ends on another replica never tells this one. At most MAX_ENTRIES runs are kept, and at
// most MAX_ESTIMATED_BYTES of them as estimated (estimatedEntryBytes: the script's characters,
// its objects, arrays, members and elements, and the entry's own cost), the least recently used
// going first. A script over MAX_SCRIPT_CHARS is read every step. A run's entry is also dropped
// where the run ends on this replica (forget, from forgetRun).
import type { ModelScript } from '../providers/scripted/model-script-schema.ts';

export const MAX_SCRIPT_CHARS = 64 * 1024;
/** Far more scripted runs than a replica steps at once; one dropped early is only read again. */
export const MAX_ENTRIES = 4096;
export const MAX_ESTIMATED_BYTES = 16 * 1024 * 1024;
/**
 * What an entry costs besides its script: the map's slot, its key, the entry and the smallest
 * parsed script (one 23-character turn measured about 850 bytes of heap an entry).
 */
export const ENTRY_OVERHEAD_BYTES = 1024;
/**
 * Heap per character of a parsed script, besides its items: what its strings take, a byte a
 * character, two outside Latin-1 (a text of 60 000 CJK characters held 1.98 bytes a character).
 */
export const PARSED_BYTES_PER_CHAR = 2;
/**
 * Heap per item of a parsed script (scriptItemCount: each object, array, member and element),
 * besides its characters. Characters alone cannot bound it: a 64 KiB script of `{}` repeated in
 * one tool call's input held 1.40 MB, 21 bytes a character. Measured on Node 24 (--expose-gc,
 * 50 entries of 64 KiB scripts), in bytes an item beyond 2 a character and the entry's 1 024:
 * `{"4000000000":0}` repeated 63.5 (a key past the array indices is a property name, and each
 * distinct one a hidden class), `{"123":0}` 62.2, one object of 6 700 distinct keys 51.6, `{}`
 * 29.1, `[[[…]]]` 26.9, `[[]]` 21.5, `[]` 17.0. Of 29 shapes none held more than its estimate
 * (the closest: the CJK text at 0.99, `{"4000000000":0}` at 0.82). An ordinary script of tool
 * calls and prose (5.5 KB, 300 items) held 9.4 KB as an entry, estimated at 36 KB (28 KB before
 * items were counted).
 */
export const PARSED_BYTES_PER_ITEM = 80;

export interface RunScriptCacheOptions {
  maxScriptChars?: number;
  maxEntries?: number;
  maxEstimatedBytes?: number;
}

interface Entry {
  configMap: string;
  key: string;
  script: ModelScript;
  bytes: number;
}

/** The heap an entry of a script of `chars` characters and `items` items (scriptItemCount) is estimated to take. Pure. */
export const estimatedEntryBytes = (chars: number, items: number): number =>
  ENTRY_OVERHEAD_BYTES + chars * PARSED_BYTES_PER_CHAR + items * PARSED_BYTES_PER_ITEM;

/**
 * The objects, arrays, members and elements of a parsed script, counted from the value: the
 * cache is given the script parsed, not its text. Without recursion: a script may nest arrays
 * as deep as JSON.parse takes them, deeper than a recursive walk's stack.
 */
export function scriptItemCount(script: ModelScript): number {
  let items = 0;
  const pending: object[] = [script];
  for (let value = pending.pop(); value !== undefined; value = pending.pop()) {
    const children: unknown[] = Array.isArray(value) ? value : Object.values(value);
    items += 1 + children.length;
    for (const child of children) if (typeof child === 'object' && child !== null) pending.push(child);
  }
  return items;
}

export class RunScriptCache {
  /** By run uid (a run has one scriptRef). A Map iterates in insertion order: re-inserting on use makes the first entry the least recently used. */
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private readonly maxScriptChars: number;
  private readonly maxEntries: number;
  private readonly maxEstimatedBytes: number;

  constructor(options: RunScriptCacheOptions = {}) {
    this.maxScriptChars = options.maxScriptChars ?? MAX_SCRIPT_CHARS;
    this.maxEntries = options.maxEntries ?? MAX_ENTRIES;
    this.maxEstimatedBytes = options.maxEstimatedBytes ?? MAX_ESTIMATED_BYTES;
  }

  get(runUid: string, configMap: string, key: string): ModelScript | undefined {
    const entry = this.entries.get(runUid);
    if (!entry || entry.configMap !== configMap || entry.key !== key) return undefined;
    this.entries.delete(runUid);
    this.entries.set(runUid, entry);
    return entry.script;
  }

  set(runUid: string, configMap: string, key: string, script: ModelScript, chars: number): void {
    this.forget(runUid);
    if (chars > this.maxScriptChars) return;
    const bytes = estimatedEntryBytes(chars, scriptItemCount(script));
    this.entries.set(runUid, { configMap, key, script, bytes });
    this.bytes += bytes;
    for (const [oldest, entry] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxEstimatedBytes) break;
      this.entries.delete(oldest);
      this.bytes -= entry.bytes;
    }
  }

  /** Drops the run's script: the run ended. */
  forget(runUid: string): void {
    const entry = this.entries.get(runUid);
    if (!entry) return;
    this.entries.delete(runUid);
    this.bytes -= entry.bytes;
  }

  /** How many runs' scripts are kept (for tests and the log). */
  get size(): number {
    return this.entries.size;
  }
}
