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
// most MAX_ESTIMATED_BYTES of them as estimated (a script's parsed objects and the entry's own
// cost count, not only its characters), the least recently used going first. A script over
// MAX_SCRIPT_CHARS is read every step. A run's entry is also dropped where the run ends on this
// replica (forget, from forgetRun).
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
 * Heap per character of a parsed script: a dense script of tool calls (the worst measured) took
 * about 4.7 bytes of heap per character of its JSON, prose about 2.
 */
export const PARSED_BYTES_PER_CHAR = 5;

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

/** The heap an entry of a script of `chars` characters is estimated to take. Pure. */
export const estimatedEntryBytes = (chars: number): number => ENTRY_OVERHEAD_BYTES + chars * PARSED_BYTES_PER_CHAR;

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
    const bytes = estimatedEntryBytes(chars);
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
